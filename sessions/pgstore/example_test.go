package pgstore_test

import (
	"fmt"
	"os"

	"github.com/bubbuild/bub-mcp/sessions"
	"github.com/bubbuild/bub-mcp/sessions/pgstore"
)

// A program enables the store with a blank import of this package (here
// the test imports it by name) and picks it by kind; replicas opening the
// same database share tapes, settings and spill chunks.
func Example() {
	store, err := sessions.Open(os.TempDir(), &sessions.Options{
		Store: pgstore.Kind,
		DSN:   os.Getenv("BUB_PG_DSN"), // postgres://user@host/db
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	sess, err := store.Session("/srv/project", "mcp:default")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sess.Settings().Model)
}
