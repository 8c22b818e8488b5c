package cli

// The commands run over the standard modules, as the bub-mcp binary
// (cmd/bub-mcp) has them; cli itself imports none.
import _ "github.com/bubbuild/bub-mcp/modules/standard"
