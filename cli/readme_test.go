package cli_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeBuildsAsMakeDoes: the README installs from a clone and builds
// plugins as make build does. go.mod has a replace directive, so
// `go install <module>@<version>` cannot work: every go install in the
// README names a path inside the clone. A go build in the README passes
// the flags of make build's go build (-trimpath is part of each package's
// cache key: without it, a plugin binary compiles everything again).
func TestReadmeBuildsAsMakeDoes(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?m)^replace `).Match(gomod) {
		for _, m := range regexp.MustCompile(`go install\s+([^\s`+"`"+`;)]+)`).FindAllStringSubmatch(string(readme), -1) {
			if !strings.HasPrefix(m[1], "./") {
				t.Errorf("README: %q cannot work: go.mod has a replace directive, so go install needs a path in a clone", m[0])
			}
		}
	}
	recipe := regexp.MustCompile(`(?m)^\t\$\(GO\) build (.*) -o \$\(BIN\) `).FindSubmatch(makefile)
	if recipe == nil {
		t.Fatal("Makefile: no `$(GO) build ... -o $(BIN)` recipe")
	}
	var flags []string // make build's flags but -ldflags and its value
	words := strings.Fields(string(recipe[1]))
	for i := 0; i < len(words); i++ {
		if words[i] == "-ldflags" {
			i++
			continue
		}
		flags = append(flags, words[i])
	}
	builds := regexp.MustCompile(`(?m)^go build .*$`).FindAllString(string(readme), -1)
	if len(builds) == 0 {
		t.Fatal("README: no go build line (the plugin example's)")
	}
	for _, line := range builds {
		for _, f := range flags {
			if !strings.Contains(" "+line+" ", " "+f+" ") {
				t.Errorf("README: %q lacks make build's %s", line, f)
			}
		}
	}
}
