package sessions

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHandoffAnchorsAndContext(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	sess := session(t, s, t.TempDir(), "handoff")
	tp := sess.Tape()
	for range 2 { // the second call must not add a second anchor
		if err := sess.EnsureBootstrap(); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, tp, KindMessage, msg("user", "before"), nil)
	if err := tp.Handoff("phase-1", "carry this forward"); err != nil {
		t.Fatal(err)
	}
	if err := tp.Handoff("", ""); err != nil { // default name
		t.Fatal(err)
	}
	mustAppend(t, tp, KindMessage, msg("user", "visible"), map[string]any{"run_id": "r"})
	mustAppend(t, tp, KindEvent, eventPayload("spill.write", nil), map[string]any{"context": false})
	mustAppend(t, tp, KindMessage, msg("user", "also visible"), map[string]any{"context": true})

	var names []string
	for _, a := range tp.Anchors(0) {
		names = append(names, a.Name)
	}
	if diff := cmp.Diff([]string{"session/start", "phase-1", "handoff"}, names); diff != "" {
		t.Errorf("Anchors(0) names (-want +got):\n%s", diff)
	}
	last2 := tp.Anchors(2)
	wantLast2 := []Anchor{
		{ID: 4, Name: "phase-1", State: map[string]any{"summary": "carry this forward"}},
		{ID: 6, Name: "handoff", State: map[string]any{"summary": ""}},
	}
	if diff := cmp.Diff(wantLast2, last2, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Date" }, cmp.Ignore())); diff != "" {
		t.Errorf("Anchors(2) (-want +got):\n%s", diff)
	}

	// The handoff event repeats the anchor.
	ev := tp.Entries()[4]
	wantEv := eventPayload("handoff", map[string]any{"name": "phase-1", "state": map[string]any{"summary": "carry this forward"}})
	if diff := cmp.Diff(wantEv, ev.Payload); diff != "" {
		t.Errorf("handoff event payload (-want +got):\n%s", diff)
	}

	since := tp.SinceLastAnchor()
	if len(since) != 4 { // handoff event, visible, spill.write, also visible
		t.Errorf("SinceLastAnchor() has %d entries; want 4", len(since))
	}
	var contents []string
	for _, e := range tp.ContextEntries() {
		if c, ok := e.Payload["content"].(string); ok {
			contents = append(contents, c)
		} else {
			contents = append(contents, e.Kind+":"+e.Payload["name"].(string))
		}
	}
	if diff := cmp.Diff([]string{"event:handoff", "visible", "also visible"}, contents); diff != "" {
		t.Errorf("ContextEntries() (-want +got):\n%s", diff)
	}
}

func TestReset(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	s := openStore(t, home, nil)
	sess := session(t, s, ws, "reset")
	tp := sess.Tape()
	if err := sess.EnsureBootstrap(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, tp, KindMessage, msg("user", "old"), nil)
	if err := sess.SetCodeMode(true); err != nil {
		t.Fatal(err)
	}
	ref, err := sess.Spill("bash", string(make([]byte, 20000)))
	if err != nil {
		t.Fatal(err)
	}
	tp.AppendAsync(KindEvent, eventPayload("loop.step", nil), nil) // queued at reset time
	before := len(tp.Entries())

	archived, err := sess.Reset(true)
	if err != nil {
		t.Fatalf("Reset(true) error: %v", err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(tp.Path()) + `\.\d{8}T\d{6}Z\.bak$`)
	if !re.MatchString(archived) {
		t.Errorf("archive path = %q; want %s", archived, re)
	}
	if got := len(fileLines(t, archived)); got != before {
		t.Errorf("archive has %d lines; want %d", got, before)
	}
	sideBak := filepath.Join(filepath.Dir(archived), tp.Name()+"__sidecar__spill.jsonl"+archived[len(tp.Path()):])
	if _, err := os.Stat(sideBak); err != nil {
		t.Errorf("sidecar archive missing: %v", err)
	}

	yes := true
	want := []Entry{
		{ID: 1, Kind: KindAnchor, Payload: map[string]any{"name": "session/start", "state": map[string]any{"owner": "human", "archived": archived}}, Meta: map[string]any{}},
		{ID: 2, Kind: KindEvent, Payload: eventPayload("handoff", map[string]any{"name": "session/start", "state": map[string]any{"owner": "human", "archived": archived}}), Meta: map[string]any{}},
		{ID: 3, Kind: KindEvent, Payload: eventPayload("code_mode_switch", map[string]any{"code_mode": true}), Meta: map[string]any{}},
		{ID: 4, Kind: KindEvent, Payload: eventPayload("sidecar.archive", map[string]any{"sidecar": "spill", "status": "ok", "reason": "tape.reset", "archive": sideBak}), Meta: map[string]any{"context": false}},
		{ID: 5, Kind: KindEvent, Payload: eventPayload("sidecar.reset", map[string]any{"sidecar": "spill", "status": "ok", "reason": "tape.reset"}), Meta: map[string]any{"context": false}},
	}
	if diff := cmp.Diff(want, tp.Entries(), ignoreDate); diff != "" {
		t.Errorf("Entries() after Reset(true) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Settings{CodeMode: &yes}, sess.Settings()); diff != "" {
		t.Errorf("Settings() after reset (-want +got):\n%s", diff)
	}
	if _, err := sess.ReadSpill(ref.Handle, 0, 1, false); err == nil {
		t.Errorf("ReadSpill after reset found the old spill")
	}

	// A second archive in the same second must not overwrite the first.
	again, err := sess.Reset(true)
	if err != nil {
		t.Fatal(err)
	}
	if again == archived {
		t.Errorf("second Reset(true) reused archive path %q", again)
	}
	if _, err := os.Stat(archived); err != nil {
		t.Errorf("first archive gone: %v", err)
	}

	// Without archive: no new .bak file, empty path, fresh ids.
	baks, _ := filepath.Glob(tp.Path() + ".*.bak")
	path, err := sess.Reset(false)
	if err != nil || path != "" {
		t.Fatalf("Reset(false) = %q, %v; want \"\", nil", path, err)
	}
	baks2, _ := filepath.Glob(tp.Path() + ".*.bak")
	if len(baks2) != len(baks) {
		t.Errorf("Reset(false) created archives: %v -> %v", baks, baks2)
	}
	es := tp.Entries()
	if es[0].ID != 1 || es[0].Payload["name"] != "session/start" {
		t.Errorf("first entry after Reset(false) = %+v", es[0])
	}
	if _, ok := es[0].Payload["state"].(map[string]any)["archived"]; ok {
		t.Errorf("Reset(false) anchor has an archived path")
	}

	// The reset survives a restart.
	s.Close()
	s2 := openStore(t, home, nil)
	sess2 := session(t, s2, ws, "reset")
	if diff := cmp.Diff(es, sess2.Tape().Entries()); diff != "" {
		t.Errorf("Entries() after restart (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Settings{CodeMode: &yes}, sess2.Settings()); diff != "" {
		t.Errorf("Settings() after restart (-want +got):\n%s", diff)
	}
}

func TestTempSessionWritesNoFiles(t *testing.T) {
	home := t.TempDir()
	s := openStore(t, home, &Options{})
	sess := session(t, s, t.TempDir(), "temp/1a2b3c4d")
	if !sess.Temp() || sess.Tape().Path() != "" {
		t.Fatalf("temp session: Temp()=%v Path()=%q", sess.Temp(), sess.Tape().Path())
	}
	if err := sess.EnsureBootstrap(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, sess.Tape(), KindMessage, msg("user", "x"), nil)
	sess.Tape().AppendAsync(KindEvent, eventPayload("loop.step", nil), nil)
	if err := sess.SetCodeMode(true); err != nil {
		t.Fatal(err)
	}
	text := string(make([]byte, 40000))
	ref, err := sess.Spill("bash", text)
	if err != nil {
		t.Fatal(err)
	}
	page, err := sess.ReadSpill(ref.Handle, 0, 4, false)
	if err != nil || page.Content != text {
		t.Errorf("ReadSpill on temp session: err=%v, content equal=%v", err, page.Content == text)
	}
	if p, err := sess.Reset(true); err != nil || p != "" {
		t.Errorf("Reset(true) on temp session = %q, %v; want \"\", nil", p, err)
	}
	if err := sess.Tape().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files := listFiles(t, home); len(files) != 0 {
		t.Errorf("temp session wrote files: %v", files)
	}
}

func TestRelease(t *testing.T) {
	s := openStore(t, t.TempDir(), nil)
	ws := t.TempDir()
	sess := session(t, s, ws, "temp/abc")
	if err := sess.Tape().Handoff("a", "kept in memory"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ws, "temp/abc"); err != nil {
		t.Fatal(err)
	}
	again := session(t, s, ws, "temp/abc")
	if again == sess || len(again.Tape().Entries()) != 0 {
		t.Errorf("Release kept the session: same=%v entries=%d", again == sess, len(again.Tape().Entries()))
	}
	if err := s.Release(ws, "never-opened"); err != nil {
		t.Errorf("Release of an unknown session = %v; want nil", err)
	}
	// A released file-backed session is flushed and loads back whole.
	file := session(t, s, ws, "kept")
	if err := file.Tape().Handoff("b", "on disk"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ws, "kept"); err != nil {
		t.Fatal(err)
	}
	if n := len(session(t, s, ws, "kept").Tape().Entries()); n == 0 {
		t.Error("released session lost its entries")
	}
}
