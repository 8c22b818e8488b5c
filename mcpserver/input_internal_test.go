package mcpserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSealedStateChecks(t *testing.T) {
	s := sealer{key: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)
	token, err := s.seal(&sealedState{V: 1, Tool: "t", Args: "a", Caller: "p", Expires: now.Add(time.Minute).Unix(),
		Answers: map[string]sealedInput{"k": {Method: "elicitation/create", Raw: []byte(`{"action":"accept"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	other := sealer{key: []byte("another key, just as long as the first")}
	cases := []struct {
		name                string
		s                   sealer
		token, tool, args   string
		caller, wantInError string
		at                  time.Time
	}{
		{"valid", s, token, "t", "a", "p", "", now},
		{"expired", s, token, "t", "a", "p", "expired", now.Add(2 * time.Minute)},
		{"other key", other, token, "t", "a", "p", "integrity", now},
		{"flipped byte", s, "x" + token[1:], "t", "a", "p", "integrity", now},
		{"no signature", s, strings.SplitN(token, ".", 2)[0], "t", "a", "p", "malformed", now},
		{"other tool", s, token, "u", "a", "p", "another call", now},
		{"other arguments", s, token, "t", "b", "p", "another call", now},
		{"other caller", s, token, "t", "a", "q", "another caller", now},
	}
	for _, c := range cases {
		st, err := c.s.open(c.token, c.tool, c.args, c.caller, c.at)
		switch {
		case c.wantInError == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantInError == "" && string(st.Answers["k"].Raw) != `{"action":"accept"}`:
			t.Errorf("%s: answers lost: %+v", c.name, st.Answers)
		case c.wantInError != "" && (!errors.Is(err, errStateInvalid) || !strings.Contains(err.Error(), c.wantInError)):
			t.Errorf("%s: error %v; want one saying %q", c.name, err, c.wantInError)
		}
	}
}

func TestArgsDigestIgnoresEncoding(t *testing.T) {
	a := argsDigest([]byte(`{"a":1,"b":[true,"x"]}`))
	if b := argsDigest([]byte(` { "b": [true, "x"], "a": 1 } `)); a != b {
		t.Errorf("same arguments, other encoding: %s != %s", a, b)
	}
	if c := argsDigest([]byte(`{"a":2,"b":[true,"x"]}`)); a == c {
		t.Error("other arguments, same digest")
	}
	if none, empty := argsDigest(nil), argsDigest([]byte("{}")); none != empty || argsDigest([]byte("null")) != empty {
		t.Error("absent, null and {} arguments differ")
	}
}

func TestLoadStateKey(t *testing.T) {
	home := t.TempDir()
	k1, err := LoadStateKey("", home)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(home, "state.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state.key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	k2, err := LoadStateKey("", home)
	if err != nil || !cmp.Equal(k1, k2) {
		t.Errorf("second load = %x, %v; want the kept key %x", k2, err, k1)
	}
	c1, err := LoadStateKey(strings.Repeat("s", 32), home)
	if err != nil || cmp.Equal(c1, k1) {
		t.Errorf("configured key = %x, %v; want one derived from the setting", c1, err)
	}
	if _, err := LoadStateKey("short", home); err == nil || !strings.Contains(err.Error(), "32 characters") {
		t.Errorf("short key: %v; want an error naming the minimum", err)
	}
	if err := os.WriteFile(filepath.Join(home, "state.key"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadStateKey("", home); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("corrupt key file: %v; want an error saying what to do", err)
	}
}

// FuzzSealedStateOpen holds the integrity rule for any token a client may
// send: open accepts only what the key sealed, so whatever it accepts
// carries exactly the sealed payload, for the same call and caller.
func FuzzSealedStateOpen(f *testing.F) {
	s := sealer{key: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)
	want := sealedState{V: 1, Tool: "t", Args: "a", Caller: "p", Expires: now.Add(time.Minute).Unix(),
		Asked:   map[string]string{"k": "elicitation/create"},
		Answers: map[string]sealedInput{"k": {Method: "elicitation/create", Raw: []byte(`{"action":"accept"}`)}}}
	token, err := s.seal(&want)
	if err != nil {
		f.Fatal(err)
	}
	body, sig, _ := strings.Cut(token, ".")
	for _, seed := range []string{token, "", ".", body, body + ".", "." + sig, token + "=", token + ".", "x" + token[1:], body + "." + sig[:len(sig)-1] + "A"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		st, err := s.open(token, "t", "a", "p", now)
		if err != nil {
			if !errors.Is(err, errStateInvalid) {
				t.Fatalf("open(%q): %v, not an errStateInvalid", token, err)
			}
			return
		}
		if diff := cmp.Diff(want, *st); diff != "" {
			t.Fatalf("open(%q) accepted a payload that was never sealed (-sealed +opened):\n%s", token, diff)
		}
	})
}
