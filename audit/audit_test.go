package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readLines decodes every line of every log file in dir, oldest file first.
func readLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	rot, err := Rotated(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for i := len(rot) - 1; i >= 0; i-- {
		files = append(files, rot[i])
	}
	files = append(files, FileName)
	var out []map[string]any
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s: line is not JSON: %v\n%s", name, err, sc.Text())
			}
			out = append(out, m)
		}
		f.Close()
	}
	return out
}

func open(t *testing.T, o Options) *Log {
	t.Helper()
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestRecordFields(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	l := open(t, Options{Dir: dir, MaxArgBytes: 32})
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	tests := []struct {
		name string
		rec  Record
		want map[string]any
	}{
		{"ok call", Record{Time: at, Principal: "ci", Profile: "default", Client: "claude/1.0", Transport: "stdio", Session: "mcp:default",
			RunID: "stdio-1", Mode: "direct", Tool: "fs.read", Args: json.RawMessage(`{ "path": "a<b>" }`), Outcome: "ok", Duration: 1500 * time.Microsecond},
			map[string]any{"time": "2026-01-02T03:04:05.000006Z", "principal": "ci", "profile": "default", "client": "claude/1.0", "transport": "stdio",
				"session": "mcp:default", "run_id": "stdio-1", "mode": "direct", "tool": "fs.read", "args": map[string]any{"path": "a<b>"}, "outcome": "ok", "duration_ms": 1.5}},
		{"no args, error", Record{Time: at, Profile: "p", Transport: "cli", Tool: "bash", Outcome: "error", ErrorKind: "tool", Error: "boom"},
			map[string]any{"time": "2026-01-02T03:04:05.000006Z", "profile": "p", "transport": "cli", "tool": "bash", "args": map[string]any{},
				"outcome": "error", "error_kind": "tool", "error": "boom", "duration_ms": 0.0}},
		{"args cut and marked", Record{Time: at, Profile: "p", Transport: "http", Tool: "fs.write", Args: json.RawMessage(`{"content":"` + strings.Repeat("é", 40) + `"}`), Outcome: "ok"},
			map[string]any{"time": "2026-01-02T03:04:05.000006Z", "profile": "p", "transport": "http", "tool": "fs.write",
				"args": `{"content":"` + strings.Repeat("é", 10) + "…[cut: 32 of 94 bytes]", "args_bytes": 94.0, "args_truncated": true, "outcome": "ok", "duration_ms": 0.0}},
		{"args not JSON", Record{Time: at, Profile: "p", Transport: "cli", Tool: "bash", Args: json.RawMessage(`{"command": "ls`), Outcome: "ok"},
			map[string]any{"time": "2026-01-02T03:04:05.000006Z", "profile": "p", "transport": "cli", "tool": "bash", "args": `{"command": "ls`, "outcome": "ok", "duration_ms": 0.0}},
		{"long error cut", Record{Time: at, Profile: "p", Transport: "cli", Tool: "x", Outcome: "error", Error: strings.Repeat("e", 40)},
			map[string]any{"time": "2026-01-02T03:04:05.000006Z", "profile": "p", "transport": "cli", "tool": "x", "args": map[string]any{},
				"outcome": "error", "error": strings.Repeat("e", 32) + "…[cut: 32 of 40 bytes]", "duration_ms": 0.0}},
	}
	for _, tt := range tests {
		l.Record(tt.rec)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	got := readLines(t, dir)
	if len(got) != len(tests) {
		t.Fatalf("%d lines; want %d", len(got), len(tests))
	}
	for i, tt := range tests {
		// The chain's link: numbered from 1, the first linking to nothing.
		if got[i]["seq"] != float64(i+1) || (i == 0) != (got[i]["prev"] == "") {
			t.Errorf("%s: seq %v, prev %q; want seq %d", tt.name, got[i]["seq"], got[i]["prev"], i+1)
		}
		delete(got[i], "seq")
		delete(got[i], "prev")
		if diff := cmp.Diff(tt.want, got[i]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, %v; want 0700", st.Mode().Perm(), err)
	}
	st, err = os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
}

func TestRotationAndRetention(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir, MaxFileBytes: 1000, KeepFiles: 3})
	for i := range 100 {
		l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: fmt.Sprintf("t%03d", i), Outcome: "ok"})
		if err := l.Flush(); err != nil { // one commit per record: each can rotate
			t.Fatal(err)
		}
	}
	rot, err := Rotated(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rot) != 3 {
		t.Errorf("rotated files = %v; want 3 kept", rot)
	}
	lines := readLines(t, dir)
	// What is kept is the newest records, in order, ending with the last.
	if len(lines) == 0 || lines[len(lines)-1]["tool"] != "t099" {
		t.Fatalf("last record = %v", lines[len(lines)-1])
	}
	for i := 1; i < len(lines); i++ {
		if lines[i-1]["tool"].(string) >= lines[i]["tool"].(string) {
			t.Fatalf("records out of order at %d: %v then %v", i, lines[i-1]["tool"], lines[i]["tool"])
		}
	}
	for _, name := range append(rot, FileName) {
		st, _ := os.Stat(filepath.Join(dir, name))
		if st.Size() > 1000+200 { // a file is rotated once it reaches the limit
			t.Errorf("%s is %d bytes", name, st.Size())
		}
	}
}

func TestKeepDays(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "audit-20000101T000000.000000000Z.jsonl")
	if err := os.WriteFile(old, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	past := time.Now().AddDate(0, 0, -10)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	l := open(t, Options{Dir: dir, MaxFileBytes: 10, KeepDays: 5})
	for range 2 {
		l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: "t", Outcome: "ok"})
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("file older than keep_days survived: %v", err)
	}
	if rot, _ := Rotated(dir); len(rot) != 1 {
		t.Errorf("rotated = %v; want the fresh one only", rot)
	}
}

// TestSharedDirectory has two Logs (two open file descriptions, as two
// processes have) write and rotate one directory at once: no record is
// lost, none is torn, none is written twice.
func TestSharedDirectory(t *testing.T) {
	dir := t.TempDir()
	a := open(t, Options{Dir: dir, MaxFileBytes: 4096, KeepFiles: -1, CommitInterval: time.Millisecond})
	b := open(t, Options{Dir: dir, MaxFileBytes: 4096, KeepFiles: -1, CommitInterval: time.Millisecond})
	const n = 500
	var wg sync.WaitGroup
	for w, l := range []*Log{a, b} {
		wg.Go(func() {
			for i := range n {
				l.Record(Record{Time: time.Now(), Profile: "p", Transport: "cli", Tool: fmt.Sprintf("w%d-%04d", w, i), Outcome: "ok"})
			}
		})
	}
	wg.Wait()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range readLines(t, dir) {
		seen[m["tool"].(string)]++
	}
	if len(seen) != 2*n {
		t.Errorf("%d distinct records; want %d", len(seen), 2*n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s written %d times", k, c)
		}
	}
	if rot, _ := Rotated(dir); len(rot) < 1 {
		t.Errorf("expected rotations, got %v", rot)
	}
	// Both writers kept one chain, across the rotations.
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact() || rep.Records != 2*n || rep.First != 1 || rep.Last != 2*n {
		t.Errorf("Verify = %+v, problem %v; want %d intact records", rep, rep.Problem, 2*n)
	}
}

func TestClosedLogDropsRecords(t *testing.T) {
	dir := t.TempDir()
	l := open(t, Options{Dir: dir})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Record(Record{Time: time.Now(), Tool: "late"})
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Errorf("a log that recorded nothing made a file: %v", err)
	}
}

func TestOpenNeedsDir(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Error("Open without a directory succeeded")
	}
}

// BenchmarkEncode is one call's audit line, as an echo call makes it.
func BenchmarkEncode(b *testing.B) {
	l := &Log{opts: Options{MaxArgBytes: DefaultMaxArgBytes}}
	r := Record{Time: time.Now(), Profile: "default", Client: "bub-mcp-bench/dev", Transport: "http", Session: "mcp:default:0123456789abcdef",
		RunID: "http-1", Mode: "direct", Tool: "echo", Args: json.RawMessage(`{"message":"hello from the benchmark"}`), Outcome: "ok", Duration: 15 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		l.encode(r)
	}
}

// BenchmarkRecordCommit is the whole write path of an echo call's record:
// encoding, the group commit's write(2) under the flock and, since the
// log is chained, the link and the head. batch records go in each commit.
func BenchmarkRecordCommit(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			l, err := Open(Options{Dir: b.TempDir(), MaxFileBytes: 1 << 40, CommitInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			r := Record{Time: time.Now(), Profile: "default", Client: "bub-mcp-bench/dev", Transport: "http", Session: "mcp:default:0123456789abcdef",
				RunID: "http-1", Mode: "direct", Tool: "echo", Args: json.RawMessage(`{"message":"hello from the benchmark"}`), Outcome: "ok", Duration: 15 * time.Microsecond}
			b.ReportAllocs()
			for b.Loop() {
				for range batch {
					l.Record(r)
				}
				if err := l.commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
}

// TestCutArgs: the cut other records of calls share with the log (the
// approvals queue) always gives JSON: whole when it fits, a marked string
// with the full size when not, arguments that are not JSON as a string.
func TestCutArgs(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		limit      int
		want       string
		wantN      int
	}{
		{"fits", `{"a": 1}`, 100, `{"a": 1}`, 0},
		{"empty", ``, 100, `{}`, 0},
		{"not JSON", `{"a": `, 100, `"{\"a\":"`, 0},
		{"too long", `{"a":"0123456789"}`, 10, `"{\"a\":\"0123…[cut: 10 of 18 bytes]"`, 18},
		{"too long, cut on a rune", `"ééééé"`, 4, `"\"é…[cut: 3 of 12 bytes]"`, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n := CutArgs(json.RawMessage(tc.args), tc.limit)
			if string(got) != tc.want || n != tc.wantN || !json.Valid(got) {
				t.Errorf("CutArgs(%q, %d) = %s, %d; want %s, %d (valid JSON)", tc.args, tc.limit, got, n, tc.want, tc.wantN)
			}
		})
	}
}
