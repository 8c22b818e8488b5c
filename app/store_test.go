package app_test

import (
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore" // the "postgres" store kind, as the binary has it
)

func TestStoreConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PG_DSN": "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=1"}
	tests := []struct{ name, src, wantErr string }{
		{"default file", "", ""},
		{"file", "[store]\nkind = \"file\"\n", ""},
		{"memory", "[store]\nkind = \"memory\"\n", ""},
		{"memory has no keys", "[store]\nkind = \"memory\"\ndsn = \"x\"\n", "test.toml:3: store.dsn: unknown key"},
		{"postgres from env", "[store]\nkind = \"postgres\"\ndsn_env = \"PG_DSN\"\npool_size = 4\n", ""},
		{"unknown kind", "[store]\nkind = \"redis\"\n", `test.toml:2: store.kind: unknown store "redis" (registered: file, memory, postgres; forgotten import?)`},
		{"postgres without dsn", "[store]\nkind = \"postgres\"\n", "store.kind: kind = \"postgres\" needs dsn or dsn_env"},
		{"both dsn", "[store]\nkind = \"postgres\"\ndsn = \"x\"\ndsn_env = \"PG_DSN\"\n", "store.dsn: set dsn or dsn_env, not both"},
		{"empty env", "[store]\nkind = \"postgres\"\ndsn_env = \"NOPE\"\n", "store.dsn_env: environment variable NOPE is empty or unset"},
		{"dsn for file", "[store]\ndsn = \"x\"\n", "test.toml:2: store.dsn: unknown key"},
		{"bad pool", "[store]\nkind = \"postgres\"\ndsn = \"postgres://x@127.0.0.1:1/db\"\npool_size = -1\n", "store.pool_size: must be >= 0"},
		{"bad dsn", "[store]\nkind = \"postgres\"\ndsn = \"::not a dsn\"\n", "postgres dsn"},
		{"unknown key", "[store]\nkind = \"file\"\nurl = \"x\"\n", "test.toml:3: store.url: unknown key"},
		{"unknown postgres key", "[store]\nkind = \"postgres\"\ndsn_env = \"PG_DSN\"\npool = 4\n", "test.toml:4: store.pool: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse("test.toml", tt.src, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.New(t.Context(), &app.Options{Config: cfg, Registry: testRegistry(), Modules: []string{"test_probe"}, Home: t.TempDir(),
				Workspace: t.TempDir(), Getenv: func(k string) string { return env[k] }})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				a.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v; want an error containing %q", err, tt.wantErr)
			}
			if a != nil {
				a.Close()
			}
		})
	}
}
