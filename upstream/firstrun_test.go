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
