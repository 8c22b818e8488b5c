package sessions

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Entries returns every entry of the tape, oldest first, streamed from
// the file (entries queued by AppendAsync are written first). Lines that
// do not parse are skipped, as they are when the tape is opened.
func (t *Tape) Entries() []Entry {
	src, err := t.open()
	if err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
		return nil
	}
	defer src.Close()
	return t.readRange(src, 0)
}

// readRange decodes the good lines of src from position from on.
func (t *Tape) readRange(src *source, from int64) []Entry {
	var out []Entry
	err := src.Forward(from, func(_, _ int64, line []byte) bool {
		if e, err := parseLine(line); err == nil {
			out = append(out, e)
		}
		return true
	})
	if err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
	}
	return out
}

// SinceLastAnchor returns the entries strictly after the last anchor (all
// of them when there is none): the part of the tape a new turn builds on.
// It reads from the last anchor onward only, whatever came before.
func (t *Tape) SinceLastAnchor() []Entry {
	src, err := t.open()
	if err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
		return nil
	}
	defer src.Close()
	var from int64
	if src.st.Anchor != nil {
		from = src.st.Anchor.End
	}
	return t.readRange(src, from)
}

// ContextEntries returns what Bub feeds the model as history: the entries
// after the last anchor, minus those marked with meta "context": false
// (spill bookkeeping, sidecar lifecycle events and the like).
func (t *Tape) ContextEntries() []Entry {
	var out []Entry
	for _, e := range t.SinceLastAnchor() {
		if c, ok := e.Meta["context"].(bool); ok && !c {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Anchor is a named point on the tape (a handoff, the session start) with
// the state recorded there.
type Anchor struct {
	ID    int
	Name  string
	State map[string]any
	Date  string
}

// DefaultAnchorLimit is how many anchors tape.anchors lists by default.
const DefaultAnchorLimit = 20

// Anchors returns the last limit anchors, oldest first (limit <= 0 means
// DefaultAnchorLimit), scanning the file backwards from its end until it
// has them. An anchor without a name is reported as "-", and one without
// state gets an empty map, as Bub does.
func (t *Tape) Anchors(limit int) []Anchor {
	if limit <= 0 {
		limit = DefaultAnchorLimit
	}
	src, err := t.open()
	if err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
		return nil
	}
	defer src.Close()
	var out []Anchor
	err = src.Backward(func(_, _ int64, line []byte) bool {
		if !bytes.Contains(line, []byte(`"anchor"`)) {
			return true // cheap: most lines are not anchors
		}
		e, err := parseLine(line)
		if err != nil || e.Kind != KindAnchor {
			return true
		}
		a := Anchor{ID: e.ID, Name: "-", State: map[string]any{}, Date: e.Date}
		if v, ok := e.Payload["name"]; ok && v != nil {
			a.Name = fmt.Sprint(v)
		}
		if st, ok := e.Payload["state"].(map[string]any); ok {
			a.State = st
		}
		out = append(out, a)
		return len(out) < limit
	})
	if err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
	}
	slices.Reverse(out)
	return out
}

// Info summarises a tape for tape.info, mainly so the model can judge how
// close it is to its context limit. Optional values are nil when unknown.
type Info struct {
	Name                   string
	Entries                int
	Anchors                int
	LastAnchor             string // "" when the tape has no named anchor
	EntriesSinceLastAnchor int
	// LastTokenUsage is total_tokens of the latest "run" event with usage.
	LastTokenUsage *int
	// LastTokenCacheHitRate is cached/prompt tokens of that same run.
	LastTokenCacheHitRate *float64
}

// String renders Info exactly as Bub's tape.info tool does, with "None"
// for unknown values and the hit rate as a percentage ("37.50%").
func (i Info) String() string {
	none := func(s string, ok bool) string {
		if !ok {
			return "None"
		}
		return s
	}
	usage, rate := "", ""
	if i.LastTokenUsage != nil {
		usage = strconv.Itoa(*i.LastTokenUsage)
	}
	if i.LastTokenCacheHitRate != nil {
		rate = strconv.FormatFloat(*i.LastTokenCacheHitRate*100, 'f', 2, 64) + "%"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", i.Name)
	fmt.Fprintf(&b, "entries: %d\n", i.Entries)
	fmt.Fprintf(&b, "anchors: %d\n", i.Anchors)
	fmt.Fprintf(&b, "last_anchor: %s\n", none(i.LastAnchor, i.LastAnchor != ""))
	fmt.Fprintf(&b, "entries_since_last_anchor: %d\n", i.EntriesSinceLastAnchor)
	fmt.Fprintf(&b, "last_token_usage: %s\n", none(usage, i.LastTokenUsage != nil))
	fmt.Fprintf(&b, "last_token_cache_hit_rate: %s", none(rate, i.LastTokenCacheHitRate != nil))
	return b.String()
}

// Info computes the tape summary. Token figures come from the newest
// "run" event whose data.usage has an integer total_tokens (older runs
// without usage are skipped). The cache hit rate is cached/prompt tokens
// of that run: prompt tokens from prompt_tokens (else input_tokens), cached
// tokens from prompt_tokens_details / input_tokens_details (cached_tokens
// or cache_read_input_tokens), else a top-level cached_tokens or
// cache_read_input_tokens; nil unless both are known and prompt > 0.
// All of it is kept in the tape's summary, so Info reads no history.
func (t *Tape) Info() Info {
	if err := t.refresh(); err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
	}
	t.mu.Lock()
	st := t.st.st
	t.mu.Unlock()
	info := Info{
		Name:                   t.name,
		Entries:                st.Entries,
		Anchors:                st.Anchors,
		EntriesSinceLastAnchor: st.Entries,
	}
	if a := st.Anchor; a != nil {
		info.EntriesSinceLastAnchor = st.Entries - a.Entries
		if a.HasName {
			info.LastAnchor = a.Name
		}
	}
	if st.Usage != nil {
		total, _ := asInt(st.Usage["total_tokens"])
		info.LastTokenUsage = &total
		if rate, ok := cacheHitRate(st.Usage); ok {
			info.LastTokenCacheHitRate = &rate
		}
	}
	return info
}

// runUsage returns data.usage of a "run" event payload when it has an
// integer total_tokens, the runs Info reports on.
func runUsage(payload map[string]any) (map[string]any, bool) {
	if payload["name"] != "run" {
		return nil, false
	}
	data, _ := payload["data"].(map[string]any)
	usage, _ := data["usage"].(map[string]any)
	if _, ok := asInt(usage["total_tokens"]); !ok {
		return nil, false
	}
	return usage, true
}

func cacheHitRate(usage map[string]any) (float64, bool) {
	prompt, ok := asInt(usage["prompt_tokens"])
	if !ok {
		prompt, ok = asInt(usage["input_tokens"])
	}
	if !ok || prompt <= 0 {
		return 0, false
	}
	cached, found := 0, false
	for _, key := range []string{"prompt_tokens_details", "input_tokens_details"} {
		if details, ok := usage[key].(map[string]any); ok {
			for _, k := range []string{"cached_tokens", "cache_read_input_tokens"} {
				if c, ok := asInt(details[k]); ok && !found {
					cached, found = c, true
				}
			}
		}
	}
	for _, k := range []string{"cached_tokens", "cache_read_input_tokens"} {
		if c, ok := asInt(usage[k]); ok && !found {
			cached, found = c, true
		}
	}
	if !found {
		return 0, false
	}
	return float64(cached) / float64(prompt), true
}

// Settings are the per-session switches a human sets with comma commands
// (,code_mode / ,model / ,reasoning_effort). They are replayed from the
// tape's latest *_switch events, so they survive restarts; zero values
// mean "not set, use the profile default".
type Settings struct {
	CodeMode        *bool  `json:"code_mode,omitempty"`
	Model           string `json:"model,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// LoadedTools are the deferred tools whose definitions tool.describe
	// loaded into the session (runtime names, sorted): its tools/list
	// includes them from then on.
	LoadedTools []string `json:"loaded_tools,omitempty"`
}

// Switch event names, one per setting; the event's data holds the value
// under the setting's key (e.g. {"code_mode": true}).
const (
	EventCodeModeSwitch        = "code_mode_switch"
	EventModelSwitch           = "model_switch"
	EventReasoningEffortSwitch = "reasoning_effort_switch"
	// EventToolDefinitionsLoaded records deferred tools loaded into the
	// session ({"tools": [runtime names]}); the loaded set only grows.
	EventToolDefinitionsLoaded = "tool.definitions.loaded"
)

// apply folds one event payload into the settings with the rules of Bub's
// load_session_settings: only events whose data has the key count, and a
// null or "" value clears the setting. Values of the wrong type are
// ignored.
func (s *Settings) apply(payload map[string]any) {
	name, _ := payload["name"].(string)
	var key string
	switch name {
	case EventCodeModeSwitch:
		key = "code_mode"
	case EventModelSwitch:
		key = "model"
	case EventReasoningEffortSwitch:
		key = "reasoning_effort"
	case EventToolDefinitionsLoaded:
		key = "tools"
	default:
		return
	}
	data, _ := payload["data"].(map[string]any)
	v, ok := data[key]
	if !ok {
		return
	}
	unset := v == nil || v == ""
	switch key {
	case "code_mode":
		if unset {
			s.CodeMode = nil
		} else if b, ok := v.(bool); ok {
			s.CodeMode = &b
		}
	case "model":
		if unset {
			s.Model = ""
		} else if m, ok := v.(string); ok {
			s.Model = m
		}
	case "reasoning_effort":
		if unset {
			s.ReasoningEffort = ""
		} else if r, ok := v.(string); ok {
			s.ReasoningEffort = r
		}
	case "tools":
		var names []string
		switch x := v.(type) {
		case []string: // appended in this process
			names = x
		case []any: // replayed from the tape
			for _, n := range x {
				if name, ok := n.(string); ok {
					names = append(names, name)
				}
			}
		}
		for _, name := range names {
			if !slices.Contains(s.LoadedTools, name) {
				s.LoadedTools = append(s.LoadedTools, name)
			}
		}
		slices.Sort(s.LoadedTools)
	}
}

// currentSettings catches up with the backend (for a file one stat per
// fileRefreshInterval when nothing is new, for PostgreSQL one query per
// refresh interval, so another process's switch shows within it) and
// returns a copy that shares nothing with the tape.
func (t *Tape) currentSettings() Settings {
	if err := t.refreshAt(false); err != nil {
		t.store.log.Warn("sessions: reading a tape", "tape", t.name, "error", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.st.st.Settings
	if s.CodeMode != nil {
		b := *s.CodeMode
		s.CodeMode = &b
	}
	s.LoadedTools = slices.Clone(s.LoadedTools)
	return s
}
