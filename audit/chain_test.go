package audit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chainedLog writes n records to a new directory, one commit each, in
// files of about five records, and returns the directory and its files
// (oldest first) with their lines.
func chainedLog(t *testing.T, n int) (string, []string, map[string][][]byte) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, MaxFileBytes: 1000, KeepFiles: -1, KeepDays: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l.Record(Record{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Profile: "p", Transport: "cli", Tool: fmt.Sprintf("t%03d", i), Outcome: "ok"})
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, lines := logFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("files = %v; want rotations", files)
	}
	return dir, files, lines
}

func logFiles(t *testing.T, dir string) ([]string, map[string][][]byte) {
	t.Helper()
	rot, err := Rotated(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(rot)
	files := append(rot, FileName)
	lines := map[string][][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		lines[f] = bytes.SplitAfter(b, []byte("\n"))
		lines[f] = lines[f][:len(lines[f])-1] // after the last newline
	}
	return files, lines
}

func rewrite(t *testing.T, dir, name string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestVerify damages a chained log in each way the issue names (a line
// altered, removed, moved; the tail cut; a rotated file's end or the
// oldest file removed; the head removed) and wants Verify to name the
// first record at fault and what is wrong with it.
func TestVerify(t *testing.T) {
	tests := []struct {
		name string
		// damage changes the log and returns the problem Verify must report.
		damage func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem
	}{
		{"intact", func(*testing.T, string, []string, map[string][][]byte) *Problem { return nil }},
		{"altered line", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[1]
			ls := lines[f]
			ls[2] = bytes.Replace(ls[2], []byte(`"outcome":"ok"`), []byte(`"outcome":"no"`), 1)
			rewrite(t, dir, f, ls)
			return &Problem{File: f, Line: 3, Kind: ProblemAltered}
		}},
		{"line no longer JSON", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[0]
			ls := lines[f]
			ls[1] = []byte("{\"tool\":\n")
			rewrite(t, dir, f, ls)
			return &Problem{File: f, Line: 2, Kind: ProblemAltered}
		}},
		{"removed line", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[1]
			ls := lines[f]
			rewrite(t, dir, f, slices.Delete(ls, 1, 2))
			return &Problem{File: f, Line: 2, Kind: ProblemMissing}
		}},
		{"reordered lines", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[1]
			ls := lines[f]
			ls[1], ls[2] = ls[2], ls[1]
			rewrite(t, dir, f, ls)
			return &Problem{File: f, Line: 2, Kind: ProblemReordered}
		}},
		{"truncated tail", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[len(files)-1]
			ls := lines[f]
			rewrite(t, dir, f, ls[:len(ls)-2])
			return &Problem{File: f, Line: len(ls) - 2, Kind: ProblemTruncated}
		}},
		{"audit.jsonl emptied", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			rewrite(t, dir, FileName, nil)
			prev := files[len(files)-2]
			return &Problem{File: prev, Line: len(lines[prev]), Kind: ProblemTruncated}
		}},
		{"rotation boundary: last line of a rotated file removed", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[1]
			rewrite(t, dir, f, lines[f][:len(lines[f])-1])
			return &Problem{File: files[2], Line: 1, Kind: ProblemMissing}
		}},
		{"rotation boundary: a rotated file removed", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			if err := os.Remove(filepath.Join(dir, files[1])); err != nil {
				t.Fatal(err)
			}
			return &Problem{File: files[2], Line: 1, Kind: ProblemMissing}
		}},
		{"oldest file removed", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			if err := os.Remove(filepath.Join(dir, files[0])); err != nil {
				t.Fatal(err)
			}
			return &Problem{File: files[1], Line: 1, Kind: ProblemMissing}
		}},
		{"head removed", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			if err := os.Remove(filepath.Join(dir, HeadFileName)); err != nil {
				t.Fatal(err)
			}
			return &Problem{File: HeadFileName, Kind: ProblemHead}
		}},
		{"last record altered", func(t *testing.T, dir string, files []string, lines map[string][][]byte) *Problem {
			f := files[len(files)-1]
			ls := lines[f]
			ls[len(ls)-1] = bytes.Replace(ls[len(ls)-1], []byte(`"t0`), []byte(`"x0`), 1)
			rewrite(t, dir, f, ls)
			return &Problem{File: f, Line: len(ls), Kind: ProblemAltered}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, files, lines := chainedLog(t, 30)
			want := tt.damage(t, dir, files, lines)
			rep, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Problem
			if got != nil {
				t.Logf("Verify: %v", got)
				got = &Problem{File: got.File, Line: got.Line, Kind: got.Kind} // Detail and Seq are for people
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Verify's problem (-want +got):\n%s", diff)
			}
			if want == nil && (rep.Records != 30 || rep.First != 1 || rep.Last != 30 || len(rep.Files) != len(files)) {
				t.Errorf("Verify = %+v; want 30 records in %d files", rep, len(files))
			}
		})
	}
}

// TestChainContinues: a restart continues the chain; a process stopped
// between writing the log and the head is followed forward; a log cut
// behind the writer's back is not healed, the next record says so.
func TestChainContinues(t *testing.T) {
	record := func(t *testing.T, dir string, n int) {
		l, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "t", Outcome: "ok"})
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(t *testing.T, dir string) *Report {
		t.Helper()
		rep, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	t.Run("restart", func(t *testing.T) {
		dir := t.TempDir()
		record(t, dir, 3)
		record(t, dir, 2)
		if rep := verify(t, dir); !rep.Intact() || rep.Last != 5 {
			t.Errorf("Verify after a restart = %+v, %v; want 5 intact records", rep, rep.Problem)
		}
	})
	t.Run("head behind the log", func(t *testing.T) {
		dir := t.TempDir()
		record(t, dir, 2)
		old, err := os.ReadFile(filepath.Join(dir, HeadFileName))
		if err != nil {
			t.Fatal(err)
		}
		record(t, dir, 2)
		if err := os.WriteFile(filepath.Join(dir, HeadFileName), old, 0o600); err != nil { // as if the head write never happened
			t.Fatal(err)
		}
		record(t, dir, 1)
		if rep := verify(t, dir); !rep.Intact() || rep.Last != 5 {
			t.Errorf("Verify = %+v, %v; want 5 intact records", rep, rep.Problem)
		}
	})
	t.Run("tail cut, then more records", func(t *testing.T) {
		dir := t.TempDir()
		record(t, dir, 4)
		path := filepath.Join(dir, FileName)
		b, _ := os.ReadFile(path)
		ls := bytes.SplitAfter(b, []byte("\n"))
		if err := os.WriteFile(path, bytes.Join(ls[:2], nil), 0o600); err != nil {
			t.Fatal(err)
		}
		record(t, dir, 1)
		rep := verify(t, dir)
		if rep.Problem == nil || rep.Problem.Kind != ProblemHead || rep.Problem.Line != 3 || rep.Problem.Seq != 5 {
			t.Errorf("Verify = %+v, %v; want the chain note of seq 5 at line 3", rep, rep.Problem)
		}
	})
	t.Run("log and head removed, then more records", func(t *testing.T) {
		dir := t.TempDir()
		l, err := Open(Options{Dir: dir, MaxFileBytes: 200, KeepFiles: -1})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "t", Outcome: "ok"})
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		for _, f := range []string{FileName, HeadFileName} {
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		record(t, dir, 1)
		rep := verify(t, dir)
		if rep.Problem == nil || rep.Problem.Kind != ProblemHead || rep.Problem.File != FileName {
			t.Errorf("Verify = %+v, %v; want the chain note of the first record after the head was lost", rep, rep.Problem)
		}
	})
}

// TestVerifyUnchained: records written before the chain (an earlier
// bub-mcp) are counted, not checked, and the chain starts after them.
func TestVerifyUnchained(t *testing.T) {
	dir := t.TempDir()
	legacy := `{"time":"2025-01-01T00:00:00Z","profile":"p","transport":"cli","tool":"old","args":{},"outcome":"ok","duration_ms":0}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(legacy+legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	l := open(t, Options{Dir: dir})
	l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "new", Outcome: "ok"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Unchained != 2 || rep.Records != 1 {
		t.Errorf("Verify = %+v, %v; want 2 unchained and 1 intact record", rep, rep.Problem)
	}
}

// TestVerifyPruned: pruning by keep_files moves the chain's start, and
// Verify accepts the oldest kept record.
func TestVerifyPruned(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxFileBytes: 600, KeepFiles: 2})
	for range 40 {
		l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "t", Outcome: "ok"})
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.First <= 1 || rep.Last != 40 {
		t.Errorf("Verify = %+v, %v; want an intact chain from a pruned start to 40", rep, rep.Problem)
	}
}

// TestVerifyPrunedUnchained: pruning that removes only files written
// before the chain leaves the chain starting at seq 1.
func TestVerifyPrunedUnchained(t *testing.T) {
	dir := t.TempDir()
	legacy := `{"time":"2025-01-01T00:00:00Z","profile":"p","transport":"cli","tool":"old","args":{},"outcome":"ok","duration_ms":0}` + "\n"
	for _, name := range []string{"audit-20000101T000000.000000000Z.jsonl", "audit-20000102T000000.000000000Z.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(legacy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l := open(t, Options{Dir: dir, MaxFileBytes: 600, KeepFiles: 2})
	for range 6 { // a rotation: the oldest legacy file goes, one stays
		l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "t", Outcome: "ok"})
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.First != 1 || rep.Last != 6 || rep.Unchained != 1 {
		t.Errorf("Verify = %+v, %v; want 1 unchained record, then 1 to 6 intact", rep, rep.Problem)
	}
}

// TestVerifyLetsWritersOn: Verify holds the log's lock only while it
// takes its snapshot, not while it reads every file, so servers sharing
// the directory keep writing (and rotating, and pruning) during a check
// of a long log; the check covers the log as it was when it began.
func TestVerifyLetsWritersOn(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxFileBytes: 600, KeepFiles: 2})
	write := func(n int) {
		for range n {
			l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "t", Outcome: "ok"})
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(20)
	testHookVerifying = func() {
		// A writer's lock is free while Verify reads...
		f, err := os.Open(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Errorf("a writer cannot lock the log while Verify reads it: %v", err)
			return
		}
		flock(f, syscall.LOCK_UN)
		// ...and writing (with rotations, and the oldest files pruned)
		// changes nothing the check reads.
		write(20)
	}
	defer func() { testHookVerifying = nil }()
	rep, err := Verify(dir)
	testHookVerifying = nil
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Last != 20 {
		t.Errorf("Verify while 20 more records were written = %+v, %v; want an intact chain to seq 20, as it was when the check began", rep, rep.Problem)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir); err != nil || !rep.Intact() || rep.Last != 40 {
		t.Errorf("Verify after = %+v, %v; want an intact chain to seq 40", rep, err)
	}
}
