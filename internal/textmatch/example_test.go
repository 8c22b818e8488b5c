package textmatch_test

import (
	"fmt"

	"github.com/bubbuild/bub-mcp/internal/textmatch"
)

// Example suggests a tool for a misspelt name and finds a typo in a tape
// entry, the two ways bub-mcp compares texts.
func Example() {
	fmt.Println(textmatch.CloseMatches("fs.raed", []string{"fs.read", "fs.write", "bash"}, 3, 0.6))
	m := textmatch.NewFuzzy("database")
	fmt.Println(m.Match("migrated the databse today"), m.Match("nothing relevant"))
	// Output:
	// [fs.read fs.write]
	// true false
}
