package sessions_test

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/sessions"
)

func Example() {
	home, err := os.MkdirTemp("", "bub-home")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)

	store, err := sessions.Open(home, nil) // normally sessions.DefaultHome()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	sess, err := store.Session(home, "mcp:default")
	if err != nil {
		log.Fatal(err)
	}
	if err := sess.EnsureBootstrap(); err != nil { // session/start anchor
		log.Fatal(err)
	}
	tape := sess.Tape()
	tape.Append("message", map[string]any{"role": "user", "content": "list the repo"}, nil)
	tape.AppendAsync("event", map[string]any{"name": "loop.step", "data": map[string]any{"status": "ok"}}, nil)
	if err := sess.SetCodeMode(true); err != nil {
		log.Fatal(err)
	}
	fmt.Println(tape.Info().Entries, tape.Info().LastAnchor, *sess.Settings().CodeMode)

	// A huge tool result goes to the spill sidecar; the model gets a reference.
	output := strings.Repeat("x", 40000)
	ref, err := sess.Spill("bash", output)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ref.Bytes, ref.Chunks)

	page, err := sess.ReadSpill(ref.Handle, 0, 1, true) // the last chunk
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(page.First, page.Last, page.NextCursor, page.Complete, len(page.Content))
	// Output:
	// 5 session/start true
	// 40000 3
	// 2 2 1 false 7232
}
