package builtin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
)

// BenchmarkGrep compares the engines on a generated tree of 2,000 files
// of 4 KiB (a .gitignore leaves out a tenth of them), counting the lines
// that match: the walker against ripgrep, whose cost includes starting a
// shell and rg and parsing rg's JSON.
func BenchmarkGrep(b *testing.B) {
	ws := b.TempDir()
	for name, content := range benchTree(2000) {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	args, _ := json.Marshal(map[string]any{"pattern": `func \w+\(`, "output_mode": "count", "limit": 2000})
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			if e.rg != "" {
				requireRipgrep(b)
			}
			reg := registry.New()
			if err := reg.Register(fsGrepTool(e.rg)); err != nil {
				b.Fatal(err)
			}
			exec := registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
			tc := &registry.ToolContext{Env: env}
			for b.Loop() {
				res := exec.Call(b.Context(), registry.Call{Tool: "fs.grep", Args: args, Context: tc})
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				if r := res.Value.(FSGrepResult); r.TotalFiles != 257 || r.Engine != e.name {
					b.Fatalf("found %d files with %s; want 257 with %s", r.TotalFiles, r.Engine, e.name)
				}
			}
		})
	}
}

// benchTree returns n files of about 4 KiB in n/20 directories; every
// tenth is under an ignored directory, every seventh has a function.
func benchTree(n int) map[string]string {
	files := map[string]string{".gitignore": "gen/\n"}
	line := "the quick brown fox jumps over the lazy dog 0123456789\n"
	for i := range n {
		dir := fmt.Sprintf("pkg%02d/sub%d", i%(n/20), i%3)
		if i%10 == 0 {
			dir = "gen"
		}
		body := strings.Repeat(line, 75)
		if i%7 == 0 {
			body += "func needle() {}\n"
		}
		files[fmt.Sprintf("%s/f%04d.go", dir, i)] = body
	}
	return files
}
