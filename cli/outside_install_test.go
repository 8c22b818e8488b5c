package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInstallWarnsUndefinedProfile: install --profile of a profile the
// configuration does not define writes the entry (the profile may come
// later) but says on stderr that serve will refuse to start until it is
// defined; a defined profile gets no warning.
func TestInstallWarnsUndefinedProfile(t *testing.T) {
	cfg := writeConfig(t, "[profiles.dev]\n")
	tests := []struct {
		name    string
		extra   []string
		profile string
		warn    string // "" for none
	}{
		{"no bub.toml", nil, "nope", `Warning: profile "nope" is not defined in HOME/bub.toml (absent) (defined: default)`},
		{"BUB_CONFIG without it", []string{"BUB_CONFIG=" + cfg}, "nope", `Warning: profile "nope" is not defined in ` + cfg + ` (defined: default, dev)`},
		{"BUB_CONFIG with it", []string{"BUB_CONFIG=" + cfg}, "dev", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			env := append(agentEnv(home, "", tt.extra...), "HOME="+home)
			code, stdout, stderr := runBinaryIn(t, ws, env, "install", "cursor", "--profile", tt.profile)
			if code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if b, err := os.ReadFile(filepath.Join(home, ".cursor", "mcp.json")); err != nil || !strings.Contains(string(b), `"--profile",`) {
				t.Errorf("the entry was not written: %q, %v", b, err)
			}
			want := strings.ReplaceAll(tt.warn, "HOME", home)
			switch {
			case want == "" && strings.Contains(stderr, "Warning"):
				t.Errorf("stderr = %q; want no warning", stderr)
			case want != "" && !strings.Contains(stderr, want):
				t.Errorf("stderr = %q; want %q", stderr, want)
			}
		})
	}
}

// TestInstallBackupsNeverOverwritten: a backup is a new file even when
// one of the same second exists (two installs in one second), so the file
// as it was before the first install survives the second.
func TestInstallBackupsNeverOverwritten(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	path := filepath.Join(home, ".cursor", "mcp.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	const old = `{"mcpServers":{"bub":{"command":"/my/own/bub","env":{"K":"v"}}}}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	// Backups of every second install may run in, as an earlier install
	// of that second would have left them.
	now := time.Now().UTC()
	taken := map[string]string{}
	for s := -1; s <= 120; s++ {
		name := path + ".bak-" + now.Add(time.Duration(s)*time.Second).Format("20060102T150405Z")
		taken[name] = "earlier backup " + name
		if err := os.WriteFile(name, []byte(taken[name]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := append(agentEnv(home, ""), "HOME="+home)
	code, stdout, stderr := runBinaryIn(t, ws, env, "install", "cursor")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for name, want := range taken {
		if b, err := os.ReadFile(name); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want it untouched", filepath.Base(name), b, err)
		}
	}
	_, backup, ok := strings.Cut(stdout, "The previous file is saved as ")
	backup, _, _ = strings.Cut(backup, ".\n")
	if b, err := os.ReadFile(backup); !ok || err != nil || string(b) != old {
		t.Errorf("backup %q = %q, %v; want the file as it was\nstdout: %s", backup, b, err, stdout)
	}
}

// TestInstallRefusesEmptyHeader: README's --header "Authorization:Bearer
// $TOKEN" with TOKEN unset must not write an entry whose every request is
// refused: an empty value, or a scheme without credentials, is a usage
// error; a whole header is written.
func TestInstallRefusesEmptyHeader(t *testing.T) {
	tests := []struct {
		header string
		code   int
		want   string
	}{
		{"Authorization:Bearer ", 2, `--header "Authorization:Bearer ": want Authorization:SCHEME CREDENTIALS`},
		{"authorization:Bearer", 2, "want Authorization:SCHEME CREDENTIALS"},
		{"Authorization:", 2, "the value is empty"},
		{"X-Key: ", 2, `--header "X-Key: ": the value is empty`},
		{"Authorization:Bearer t0k", 0, `"Authorization": "Bearer t0k"`},
		{"X-Key:v", 0, `"X-Key": "v"`},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			home := t.TempDir()
			env := append(agentEnv(home, ""), "HOME="+home)
			code, stdout, stderr := runBinaryIn(t, t.TempDir(), env, "install", "cursor", "--print", "--http", "http://127.0.0.1:8080/mcp", "--header", tt.header)
			if code != tt.code || !strings.Contains(stdout+stderr, tt.want) {
				t.Errorf("exit %d; want %d with %q\nstdout: %s\nstderr: %s", code, tt.code, tt.want, stdout, stderr)
			}
		})
	}
}
