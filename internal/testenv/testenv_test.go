package testenv_test

import (
	"testing"

	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// A dependency that is there is returned; one that is not skips outside
// CI and fails under CI=true.
func TestMustHave(t *testing.T) {
	if p := testenv.MustHaveExec(t, "sh", "apt-get install dash"); p == "" {
		t.Fatal("sh: empty path")
	}
	testenv.MustHave(t, true, "nothing", "nothing")
	missing := map[string]func(t testing.TB){
		"MustHaveExec": func(t testing.TB) { testenv.MustHaveExec(t, "no-such-program-bub", "nothing") },
		"MustHave":     func(t testing.TB) { testenv.MustHave(t, false, "a capability", "nothing") },
		"MustHaveFile": func(t testing.TB) { testenv.MustHaveFile(t, "/no/such/file/bub", "a file", "nothing") },
	}
	for name, call := range missing {
		for _, ci := range []string{"", "true"} {
			t.Run(name+"/CI="+ci, func(t *testing.T) {
				t.Setenv("CI", ci)
				var ft fakeT
				func() {
					defer func() { recover() }()
					call(&ft)
				}()
				if ci == "true" && (!ft.failed || ft.skipped) {
					t.Errorf("under CI: failed=%v skipped=%v; want a failure", ft.failed, ft.skipped)
				}
				if ci == "" && (!ft.skipped || ft.failed) {
					t.Errorf("outside CI: failed=%v skipped=%v; want a skip", ft.failed, ft.skipped)
				}
			})
		}
	}
}

// fakeT records Fatal and Skip; both stop the caller, as testing's do.
type fakeT struct {
	testing.TB
	failed, skipped bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true; panic("fatal") }
func (f *fakeT) Skip(...any)           { f.skipped = true; panic("skip") }
