package upstream_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFirstRunErrors: a first bub.toml or mcp.json with a mistake is told
// where (file, line and, in JSON, column; the key path) and what is wrong,
// in the file's own words, each layer of the message once. A misspelt key
// was reported as the key it misses ("command ... is required"), JSON of
// the wrong shape with Go types, and broken JSON without a place.
func TestFirstRunErrors(t *testing.T) {
	for _, tc := range []struct {
		name, toml, mcpJSON string
		want                string // $HOME stands for the home directory
	}{{
		name: "misspelt key, with the key it resembles",
		toml: "[upstreams.y]\ncomand = \"x\"\n",
		want: "config: $HOME/bub.toml:2: upstreams.y.comand: unknown key; did you mean command?",
	}, {
		name: "misspelt key of an override",
		toml: "[upstreams.y]\ncommand = \"x\"\n[upstreams.y.overrides.t]\nnmae = \"z\"\n",
		want: "config: $HOME/bub.toml:4: upstreams.y.overrides.t.nmae: unknown key; did you mean name?",
	}, {
		name: "unknown key like none",
		toml: "[upstreams.y]\ncommand = \"x\"\nfrobnicate = 1\n",
		want: "config: $HOME/bub.toml:3: upstreams.y.frobnicate: unknown key (see bub.toml.example)",
	}, {
		name:    "mcp.json: a list, not an object",
		mcpJSON: `[]`,
		want:    `$HOME/mcp.json:1:1: want an object such as {"mcpServers": {...}}, not a list`,
	}, {
		name:    "mcp.json: servers as a list",
		mcpJSON: `{"mcpServers": []}`,
		want:    `$HOME/mcp.json:1:16: mcpServers: want an object of servers, such as {"<name>": {"command": "..."}}, not a list`,
	}, {
		name:    "mcp.json: a server that is not an object",
		mcpJSON: "{\n  \"servers\": {\n    \"x\": 3}}",
		want:    `$HOME/mcp.json:3:10: servers.x: want an object such as {"command": "...", "args": [...]} or {"url": "..."}, not a number`,
	}, {
		name:    "mcp.json: args as a string",
		mcpJSON: "{\"mcpServers\": {\n  \"x\": {\"command\": \"a\", \"args\": \"-v\"}}}",
		want:    "$HOME/mcp.json:2:33: mcpServers.x.args: want a list of strings, not a string",
	}, {
		name:    "mcp.json: a number in args, columns in characters",
		mcpJSON: `{"mcpServers": {"ü": {"command": "a", "args": ["b", 1]}}}`,
		want:    "$HOME/mcp.json:1:53: mcpServers.ü.args.1: want a string, not a number",
	}, {
		name:    "mcp.json: env of numbers",
		mcpJSON: `{"mcpServers": {"x": {"command": "a", "env": {"N": 1}}}}`,
		want:    "$HOME/mcp.json:1:52: mcpServers.x.env.N: want a string, not a number",
	}, {
		name:    "mcp.json: disabled as a string",
		mcpJSON: `{"mcpServers": {"x": {"command": "a", "disabled": "yes"}}}`,
		want:    "$HOME/mcp.json:1:51: mcpServers.x.disabled: want true or false, not a string",
	}, {
		name:    "mcp.json: truncated",
		mcpJSON: "{\"mcpServers\": {\n  \"x\": {\"command\": \"a\"",
		want:    "$HOME/mcp.json:2:23: unexpected end of file: an object, list or string is not closed",
	}, {
		name:    "mcp.json: a trailing comma",
		mcpJSON: "{\"mcpServers\": {\n  \"x\": {\"command\": \"a\",\n  }}}",
		want:    "$HOME/mcp.json:3:3: invalid character '}' looking for beginning of object key string (JSON has no comma after the last item)",
	}, {
		name:    "mcp.json: a comment",
		mcpJSON: "{\n  // mine\n  \"mcpServers\": {}}",
		want:    "$HOME/mcp.json:2:3: invalid character '/' looking for beginning of object key string (JSON has no comments)",
	}, {
		name:    "mcp.json: empty",
		mcpJSON: " ",
		want:    `$HOME/mcp.json:1:2: the file is empty; want an object such as {"mcpServers": {...}}`,
	}, {
		name:    "mcp.json: a bad value is placed at its key",
		mcpJSON: "{\"mcpServers\": {\"x\": {\n  \"command\": \"a\",\n  \"type\": \"ws\"}}}",
		want:    `$HOME/mcp.json:3:11: mcpServers.x.type: unknown type "ws" (want stdio, http or sse)`,
	}, {
		name:    "mcp.json: a missing key is placed at its server",
		mcpJSON: "{\"mcpServers\": {\n  \"x\": {\"args\": [\"a\"]}}}",
		want:    "$HOME/mcp.json:2:8: mcpServers.x.command: one of command (stdio) or url (streamable HTTP) is required",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if tc.mcpJSON != "" {
				if err := os.WriteFile(filepath.Join(home, "mcp.json"), []byte(tc.mcpJSON), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := tryHost(t, tc.toml, home)
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			want := "app: module upstream: " + strings.ReplaceAll(tc.want, "$HOME", home)
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
