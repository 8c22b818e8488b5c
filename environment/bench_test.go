package environment

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/testenv"
)

// BenchmarkSpawnTrue measures Spawn+Wait of a shell command, to compare
// with BenchmarkExecBashTrue: the environment should add little to the
// cost of fork and exec.
func BenchmarkSpawnTrue(b *testing.B) {
	e, err := NewLocal(&LocalOptions{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		p, err := e.Spawn(ctx, Spec{Command: "true"})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(); code != 0 || err != nil {
			b.Fatalf("Wait() = %d, %v", code, err)
		}
	}
}

// BenchmarkExecBashTrue is the baseline: os/exec running bash -c true.
func BenchmarkExecBashTrue(b *testing.B) {
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command("bash", "-c", "true")
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadText reads a 3.4 MB text file; the buffer is sized from
// the file, so the allocations stay few whatever the size.
func BenchmarkReadText(b *testing.B) {
	e, err := NewLocal(&LocalOptions{Workspace: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	p := filepath.Join(e.Workspace(), "f.txt")
	if err := os.WriteFile(p, []byte(strings.Repeat("hello world line\n", 200000)), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.ReadText(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawnTrueEnvs is `bash -c true` to exit, on each environment: the
// sandbox's cost over local is bwrap setting up its namespaces and mounts.
func BenchmarkSpawnTrueEnvs(b *testing.B) {
	for _, kind := range []string{"local", "sandbox"} {
		b.Run(kind, func(b *testing.B) {
			var e Environment
			var err error
			if kind == "local" {
				e, err = NewLocal(&LocalOptions{Workspace: b.TempDir()})
			} else {
				testenv.MustHaveBwrap(b)
				e, err = NewSandbox(&SandboxOptions{Workspace: b.TempDir()})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			var times []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				p, err := e.Spawn(context.Background(), Spec{Command: "true"})
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, p.Stdout())
				io.Copy(io.Discard, p.Stderr())
				if code, err := p.Wait(); code != 0 || err != nil {
					b.Fatalf("Wait() = %d, %v", code, err)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2])/float64(time.Millisecond), "p50-ms")
		})
	}
}
