package sessions

import (
	"sync"
	"time"
)

// Session is one conversation's persisted state: its main tape, its spill
// sidecar and the settings replayed from the tape. Get it from
// [Store.Session]; it is safe for concurrent use.
type Session struct {
	store     *Store
	workspace string
	id        string
	temp      bool
	tape      *Tape

	// life is held exclusively by Reset and shared by the operations that
	// span both tapes (Spill, ReadSpill, EnsureBootstrap), so they never see
	// a half-reset session.
	life   sync.RWMutex
	bootMu sync.Mutex

	sideMu sync.Mutex
	spill  *Tape // loaded on first use
}

// ID is the session id as given (e.g. "mcp:default", "temp/1a2b3c4d").
func (s *Session) ID() string { return s.id }

// Workspace is the resolved workspace path the tape name is derived from.
func (s *Session) Workspace() string { return s.workspace }

// Temp reports whether the session is memory-only (its id starts with
// "temp/"): nothing it records reaches the disk.
func (s *Session) Temp() bool { return s.temp }

// Tape is the session's main tape.
func (s *Session) Tape() *Tape { return s.tape }

// Settings returns the session's current settings, as replayed from the
// latest *_switch events on its tape.
func (s *Session) Settings() Settings { return s.tape.currentSettings() }

// SetCodeMode records a code_mode_switch event (fsynced), which applies
// from the next turn and survives restarts.
func (s *Session) SetCodeMode(enable bool) error {
	_, err := s.tape.AppendEvent(EventCodeModeSwitch, map[string]any{"code_mode": enable}, nil)
	return err
}

// LoadTools records a tool.definitions.loaded event (fsynced) for the
// deferred tools whose definitions the session now has.
func (s *Session) LoadTools(names []string) error {
	_, err := s.tape.AppendEvent(EventToolDefinitionsLoaded, map[string]any{"tools": names}, nil)
	return err
}

// SetModel records a model_switch event (fsynced); "" clears the override.
func (s *Session) SetModel(model string) error {
	_, err := s.tape.AppendEvent(EventModelSwitch, map[string]any{"model": model}, nil)
	return err
}

// SetReasoningEffort records a reasoning_effort_switch event (fsynced); ""
// clears the override.
func (s *Session) SetReasoningEffort(effort string) error {
	_, err := s.tape.AppendEvent(EventReasoningEffortSwitch, map[string]any{"reasoning_effort": effort}, nil)
	return err
}

// Names Bub gives the handoff machinery: the anchor every fresh or reset
// tape starts with, and the event that accompanies each handoff anchor.
const (
	AnchorSessionStart = "session/start"
	EventHandoff       = "handoff"
)

// handoffDrafts builds Bub's handoff pair: an anchor carrying the state,
// and a "handoff" event repeating it for the audit trail.
func handoffDrafts(name string, state map[string]any) ([]draft, error) {
	anchor := map[string]any{"name": name}
	if state != nil {
		anchor["state"] = state
	}
	evState := state
	if evState == nil {
		evState = map[string]any{}
	}
	a, err := makeDraft(KindAnchor, anchor, nil)
	if err != nil {
		return nil, err
	}
	e, err := makeDraft(KindEvent, eventPayload(EventHandoff, map[string]any{"name": name, "state": evState}), nil)
	if err != nil {
		return nil, err
	}
	return []draft{a, e}, nil
}

// Handoff starts a new context window: it appends an anchor named name
// (default "handoff") with state {"summary": summary} and a matching
// "handoff" event, in one fsynced write. Later turns see only what follows.
func (t *Tape) Handoff(name, summary string) error {
	if name == "" {
		name = "handoff"
	}
	ds, err := handoffDrafts(name, map[string]any{"summary": summary})
	if err != nil {
		return err
	}
	_, err = t.appendDrafts(ds, true, nil)
	return err
}

// EnsureBootstrap writes the session/start anchor ({"owner": "human"})
// when the tape has no anchor yet, so the first turn has a starting point.
// Calling it again is a no-op.
func (s *Session) EnsureBootstrap() error {
	s.life.RLock()
	defer s.life.RUnlock()
	s.bootMu.Lock()
	defer s.bootMu.Unlock()
	if s.tape.Info().Anchors > 0 {
		return nil // the common case, without taking the file lock
	}
	ds, err := handoffDrafts(AnchorSessionStart, map[string]any{"owner": "human"})
	if err != nil {
		return err
	}
	// Decided under the file lock, so two processes starting one session
	// write one session/start between them.
	_, err = s.tape.appendDrafts(ds, true, func(st *state) bool { return st.Anchors == 0 })
	return err
}

// Reset clears the session's tape and spill sidecar and starts over with a
// session/start anchor. With archive set, the old files are first moved to
// <tape>.jsonl.<YYYYmmddTHHMMSSZ>.bak (the sidecar likewise) and the new
// anchor's state records the main archive under "archived"; the archive
// path is returned. A temp/ session has no files, so it is cleared without
// an archive and "" is returned.
//
// Unlike Bub, which loses them until the next switch, the current settings
// (code mode, model, reasoning effort) are recorded again after the anchor,
// so a reset does not silently turn code mode off after a restart. The
// sidecar's fate is recorded as sidecar.archive / sidecar.reset events
// (context=false); a failed sidecar archive leaves the sidecar in place
// rather than failing the reset.
func (s *Session) Reset(archive bool) (string, error) {
	s.life.Lock()
	defer s.life.Unlock()
	settings := s.tape.currentSettings()
	stamp := ""
	if archive && !s.temp {
		stamp = time.Now().UTC().Format("20060102T150405Z")
	}
	archived, err := s.tape.reset(stamp, true)
	if err != nil {
		return "", err
	}

	var sideArchive map[string]any
	sideReset := map[string]any{"sidecar": SpillSidecar, "status": "ok", "reason": "tape.reset"}
	if side, err := s.spillTape(); err != nil {
		sideReset["status"], sideReset["error"] = "error", err.Error()
	} else {
		path, err := side.reset(stamp, false)
		switch {
		case stamp != "" && err != nil:
			sideArchive = map[string]any{"sidecar": SpillSidecar, "status": "error", "reason": "tape.reset", "error": err.Error()}
			sideReset["status"], sideReset["cause"] = "skipped", "archive_failed"
		case stamp != "":
			sideArchive = map[string]any{"sidecar": SpillSidecar, "status": "ok", "reason": "tape.reset"}
			if path != "" {
				sideArchive["archive"] = path
			}
		case err != nil:
			sideReset["status"], sideReset["error"] = "error", err.Error()
		}
	}

	state := map[string]any{"owner": "human"}
	if archived != "" {
		state["archived"] = archived
	}
	ds, err := handoffDrafts(AnchorSessionStart, state)
	if err != nil {
		return "", err
	}
	add := func(kind string, payload, meta map[string]any) {
		if d, err := makeDraft(kind, payload, meta); err == nil {
			ds = append(ds, d)
		}
	}
	if settings.CodeMode != nil {
		add(KindEvent, eventPayload(EventCodeModeSwitch, map[string]any{"code_mode": *settings.CodeMode}), nil)
	}
	if settings.Model != "" {
		add(KindEvent, eventPayload(EventModelSwitch, map[string]any{"model": settings.Model}), nil)
	}
	if settings.ReasoningEffort != "" {
		add(KindEvent, eventPayload(EventReasoningEffortSwitch, map[string]any{"reasoning_effort": settings.ReasoningEffort}), nil)
	}
	if len(settings.LoadedTools) > 0 {
		add(KindEvent, eventPayload(EventToolDefinitionsLoaded, map[string]any{"tools": settings.LoadedTools}), nil)
	}
	noContext := map[string]any{"context": false}
	if sideArchive != nil {
		add(KindEvent, eventPayload("sidecar.archive", sideArchive), noContext)
	}
	add(KindEvent, eventPayload("sidecar.reset", sideReset), noContext)
	_, err = s.tape.appendDrafts(ds, true, nil)
	return archived, err
}

// spillTape returns the spill sidecar, loading it on first use.
func (s *Session) spillTape() (*Tape, error) {
	s.sideMu.Lock()
	defer s.sideMu.Unlock()
	if s.spill != nil {
		return s.spill, nil
	}
	if s.store.isClosed() {
		return nil, ErrClosed
	}
	t := newTape(s.store, s.tape.name+"__sidecar__"+SpillSidecar, s.temp)
	if err := t.load(); err != nil {
		return nil, err
	}
	s.spill = t
	return t, nil
}

func (s *Session) close() error {
	err := s.tape.close()
	s.sideMu.Lock()
	defer s.sideMu.Unlock()
	if s.spill != nil {
		if serr := s.spill.close(); err == nil {
			err = serr
		}
	}
	return err
}
