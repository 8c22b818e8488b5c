// Package seedcheck_test checks internal/schemaseed's file against what
// reflection gives today, and rewrites it with -update. It does not import
// schemaseed, so every schema here is reflected.
package seedcheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/cli"
	_ "github.com/bubbuild/bub-mcp/modules/standard" // the tools whose schemas are seeded
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite ../schemas.json")

const seedFile = "../schemas.json"

// TestSeedsCurrent builds the tools a zero-configuration server builds
// (through the CLI, as serve does) and compares the schemas reflected for
// them with the seeds the binary carries.
func TestSeedsCurrent(t *testing.T) {
	home := t.TempDir()
	env := &cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard,
		Getenv: func(k string) string {
			if k == "BUB_HOME" {
				return home
			}
			return ""
		}}
	if code := cli.Run(context.Background(), env, []string{"tools", "--json", "--workspace", t.TempDir()}); code != 0 {
		t.Fatalf("bub-mcp tools exited %d", code)
	}
	got := registry.ReflectedSchemas()
	if len(got) < 20 {
		t.Fatalf("only %d schemas were reflected; want every builtin tool's", len(got))
	}
	want := encode(got)
	if *update {
		if err := os.WriteFile(seedFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(have)); diff != "" {
		t.Errorf("%s is stale; run go test ./internal/schemaseed/seedcheck -update (-want +got):\n%s", seedFile, diff)
	}
}

// encode writes the seeds one per line, sorted, each schema exactly as
// reflection gave it (a seed is what tools/list will send).
func encode(m map[string]json.RawMessage) []byte {
	keys := slices.Sorted(maps.Keys(m))
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		name, _ := json.Marshal(k)
		b.Write(name)
		b.WriteString(": ")
		b.Write(m[k])
		if i < len(keys)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes()
}
