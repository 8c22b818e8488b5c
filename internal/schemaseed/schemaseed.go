// Package schemaseed carries the JSON Schemas of bub-mcp's own tool types
// into the binary (registry.SeedSchemas), so that a server does not
// reflect them at each start: that reflection was ~2.5 ms of the ~20 ms
// before its first tools/list. cmd/bub-mcp imports it for its side effect;
// tests of the other packages do not, so they reflect every type.
//
// schemas.json is generated, and checked, by the test in seedcheck:
//
//	go test ./internal/schemaseed/seedcheck -update
//
// A seed that no longer matches what reflection gives fails that test,
// which is part of make test.
package schemaseed

import (
	_ "embed"

	"github.com/bubbuild/bub-mcp/registry"
)

//go:embed schemas.json
var schemas []byte

func init() {
	if err := registry.SeedSchemas(schemas); err != nil {
		panic("schemaseed: " + err.Error()) // the embedded file is generated: a build error
	}
}
