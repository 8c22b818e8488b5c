package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// boxKeys stands for an environment module's own keys: config knows none
// of them, the module decodes them through the ModuleRef.
type boxKeys struct {
	Memory  Size     `toml:"memory"`
	Network string   `toml:"network"`
	Paths   []string `toml:"read_only"`
}

// TestEnvironmentSpellings: the nested table and the spelling from before
// modules were namespaced give the module the same kind and keys, and
// errors name the table the keys were written in.
func TestEnvironmentSpellings(t *testing.T) {
	want := boxKeys{Memory: 256 << 20, Network: "host", Paths: []string{"/opt"}}
	tests := []struct {
		name, src string
		table     string
	}{
		{"nested table", "[profiles.p.environment]\nkind = \"sandbox\"\nmemory = \"256MiB\"\nnetwork = \"host\"\nread_only = [\"/opt\"]\n", "profiles.p.environment"},
		{"inline table", "[profiles.p]\nenvironment = { kind = \"sandbox\", memory = \"256MiB\", network = \"host\", read_only = [\"/opt\"] }\n", "profiles.p.environment"},
		{"old string and table", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nmemory = \"256MiB\"\nnetwork = \"host\"\nread_only = [\"/opt\"]\n", "profiles.p.sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("t.toml", tt.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref := c.Profiles["p"].Environment
			var got boxKeys
			if err := ref.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if err := c.Check(); err != nil {
				t.Errorf("Check after the module decoded its keys: %v", err)
			}
			if ref.Kind != "sandbox" || strings.Join(ref.Table, ".") != tt.table {
				t.Errorf("ref = kind %q table %q; want sandbox, %s", ref.Kind, strings.Join(ref.Table, "."), tt.table)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("module keys (-want +got):\n%s", diff)
			}
			if err := ref.Fail("bad", "network"); !strings.Contains(err.Error(), tt.table+".network: bad") || !strings.Contains(err.Error(), "t.toml:") {
				t.Errorf("Fail = %v; want it to name t.toml and %s.network", err, tt.table)
			}
		})
	}
	c, err := Parse("t.toml", "[profiles.p]\ntools = [\"fs.*\"]\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref := c.Profiles["p"].Environment; ref == nil || ref.Kind != "" {
		t.Errorf("environment of a profile naming none = %+v; want kind \"\" (the default)", ref)
	}
}

// TestEnvironmentErrors: a key the module does not know is refused with
// file, line and key; the two spellings are not mixed, and the message
// names the new one.
func TestEnvironmentErrors(t *testing.T) {
	tests := []struct {
		name, src string
		parse     bool // the error comes from Parse, not Check
		want      string
	}{
		{"unknown key in nested table", "[profiles.p.environment]\nkind = \"sandbox\"\n\nmemroy = \"1GiB\"\n", false, "t.toml:4: profiles.p.environment.memroy: unknown key"},
		{"unknown key in old table", "[profiles.p]\nenvironment = \"sandbox\"\n[profiles.p.sandbox]\nmemroy = \"1GiB\"\n", false, "t.toml:4: profiles.p.sandbox.memroy: unknown key"},
		{"old table with new table", "[profiles.p.environment]\nkind = \"sandbox\"\n[profiles.p.sandbox]\nmemory = \"1GiB\"\n", true, "t.toml:3: profiles.p.sandbox: the old spelling of the sandbox keys: with [profiles.p.environment], write them in that table"},
		{"old table without environment", "[profiles.p.sandbox]\nmemory = \"1GiB\"\n", true, `t.toml:1: profiles.p.sandbox: only read with environment = "sandbox"; write [profiles.p.environment] kind = "sandbox" with the sandbox keys in that table`},
		{"old table with another kind", "[profiles.p]\nenvironment = \"local\"\n[profiles.p.sandbox]\nmemory = \"1GiB\"\n", true, `profiles.p.sandbox: only read with environment = "sandbox", not "local"`},
		{"not a table", "[profiles.p]\nenvironment = 3\n", true, `t.toml:2: profiles.p.environment: want a table [profiles.p.environment] with kind = "<kind>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("t.toml", tt.src, nil)
			if !tt.parse {
				if err != nil {
					t.Fatal(err)
				}
				var keys boxKeys
				if err := c.Profiles["p"].Environment.Decode(&keys); err != nil {
					t.Fatal(err)
				}
				err = c.Check()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v; want it to contain %q", err, tt.want)
			}
		})
	}
}
