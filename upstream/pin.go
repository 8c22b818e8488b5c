package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/gowebpki/jcs"
)

// The values of [upstreams.<name>] pin.
const (
	// PinStrict trusts a new server's first tools and quarantines any
	// later change or addition until a human approves it.
	PinStrict = "strict"
	// PinApproveFirst quarantines even a new server's first tools.
	PinApproveFirst = "approve-first"
	// PinWarn lists changed and added tools, with a warning and an audit
	// record, until a human approves them.
	PinWarn = "warn"
	// PinOff does not pin.
	PinOff = "off"
)

// firstUseWindow is how long after this process first saw a server its
// tool lists are still its "first" ones: servers such as
// server-everything add tools right after initialize (with list_changed),
// and those belong to what first use trusts.
const firstUseWindow = time.Minute

// pinPoll is how often a running server looks for approvals made by
// `bub-mcp upstreams approve` (a stat of each pins file).
var pinPoll = time.Second

// pinnedFields are the parts of a tool definition that are pinned.
var pinnedFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// canonicalTool is the RFC 8785 canonical JSON of a tool definition's
// pinned fields and its SHA-256; ok is false for an entry that is not a
// named tool (registration skips those anyway).
func canonicalTool(raw json.RawMessage) (name string, canon []byte, sum string, ok bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return "", nil, "", false
	}
	if json.Unmarshal(fields["name"], &name) != nil || name == "" {
		return "", nil, "", false
	}
	picked := make(map[string]json.RawMessage, len(pinnedFields))
	for _, k := range pinnedFields {
		if v, ok := fields[k]; ok && string(v) != "null" {
			picked[k] = v
		}
	}
	b, err := json.Marshal(picked)
	if err != nil {
		return "", nil, "", false
	}
	if canon, err = jcs.Transform(b); err != nil {
		return "", nil, "", false
	}
	h := sha256.Sum256(canon)
	return name, canon, hex.EncodeToString(h[:]), true
}

// pinState is what the module knows of one server's pins.
type pinState struct {
	mu sync.Mutex
	// set is the pin set as last loaded or stored; stamp the store's
	// stamp then.
	set   *PinSet
	stamp string
	// created is when this process made the server's pin set: lists until
	// firstUseWindow after it are trusted on first use.
	created time.Time
	// raws is the last tool list, whole; listed its names.
	raws   []json.RawMessage
	listed []string
	// held are the tools not admitted now, by runtime name (upstream
	// tool name as value); warned the ones admitted though not approved.
	held   map[string]string
	warned int
	err    string // the store's last failure
	// canon is the canonical form of each entry of the last list, by the
	// SHA-256 of its raw bytes.
	canon map[[32]byte]canonEntry
}

// canonEntry is canonicalTool's result for one raw entry.
type canonEntry struct {
	name, sum string
	canon     []byte
	ok        bool
}

// pinEvent is one quarantine, warning or pin, logged and audited after
// the store's lock is let go.
type pinEvent struct {
	kind, tool, sum, prev, reason, by string
}

func (m *Module) pinStateOf(name string) *pinState {
	m.pinMu.Lock()
	defer m.pinMu.Unlock()
	if m.pins == nil {
		m.pins = map[string]*pinState{}
	}
	ps := m.pins[name]
	if ps == nil {
		ps = &pinState{}
		m.pins[name] = ps
	}
	return ps
}

// pinMode is the server's pin setting, defaulted.
func (s *Server) pinMode() string {
	if s.Pin == "" {
		return PinStrict
	}
	return s.Pin
}

// admit checks a tool list against the server's pins, pinning a new
// server's first tools (unless approve-first) and recording changed and
// new ones as pending, and returns the entries to register: all but the
// quarantined tools. Entries that are not tools, and tools the server's
// tools/deny globs leave out, pass through for registration to skip. It
// runs once per tool list, never per call.
func (u *upstream) admit(raws []json.RawMessage) []json.RawMessage {
	mode := u.cfg.pinMode()
	if mode == PinOff || u.m.pinStore == nil {
		return raws
	}
	type cand struct {
		i             int
		name, runtime string
		canon         []byte
		sum           string
	}
	ps := u.m.pinStateOf(u.cfg.name)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	// Canonical forms are remembered by the entry's raw bytes: a list
	// that comes again unchanged costs a SHA-256 per tool, not a JCS pass.
	seen := make(map[[32]byte]canonEntry, len(raws))
	var cands []cand
	for i, raw := range raws {
		key := sha256.Sum256(raw)
		e, ok := ps.canon[key]
		if !ok {
			e.name, e.canon, e.sum, e.ok = canonicalTool(raw)
		}
		seen[key] = e
		if !e.ok {
			continue
		}
		rt := RuntimeName(u.cfg.name, e.name)
		if !u.cfg.allowed(e.name, rt) {
			continue
		}
		cands = append(cands, cand{i, e.name, rt, e.canon, e.sum})
	}
	ps.canon = seen
	ps.raws = raws
	ps.listed = ps.listed[:0]
	for _, c := range cands {
		ps.listed = append(ps.listed, c.name)
	}
	now := time.Now()
	var events []pinEvent
	var set *PinSet
	// The steady state (an unchanged list, pins unchanged since last
	// read) needs neither the store's lock nor a read.
	if ps.set != nil && (ps.created.IsZero() || now.Sub(ps.created) >= firstUseWindow) {
		if st, err := u.m.pinStore.Stamp(u.cfg.name); err == nil && st == ps.stamp {
			settled := true
			listed := make(map[string]bool, len(cands))
			for _, c := range cands {
				listed[c.name] = true
				_, pending := ps.set.Pending[c.name]
				if ps.set.Pins[c.name].SHA256 == c.sum && !pending || pending && ps.set.Pending[c.name].SHA256 == c.sum {
					continue
				}
				settled = false
				break
			}
			for name := range ps.set.Pending {
				settled = settled && listed[name]
			}
			if settled {
				set = ps.set
			}
		}
	}
	var err error
	if set == nil {
		err = u.m.pinStore.Update(u.cfg.name, func(cur *PinSet) (*PinSet, bool, error) {
			events, set = nil, cur
			changed := false
			fresh := cur == nil
			if fresh {
				set, changed = newPinSet(now), true
				if mode != PinApproveFirst {
					ps.created = now
				}
			}
			firstUse := !ps.created.IsZero() && now.Sub(ps.created) < firstUseWindow
			listed := map[string]bool{}
			for _, c := range cands {
				listed[c.name] = true
				pin, pinned := set.Pins[c.name]
				if pinned && pin.SHA256 == c.sum {
					if _, ok := set.Pending[c.name]; ok {
						delete(set.Pending, c.name)
						changed = true
					}
					continue
				}
				if firstUse {
					set.Pins[c.name] = Pin{SHA256: c.sum, Definition: c.canon, Since: now, By: "first use"}
					delete(set.Pending, c.name)
					events = append(events, pinEvent{kind: "pin", tool: c.name, sum: c.sum, prev: pin.SHA256, reason: "first use"})
					changed = true
					continue
				}
				if p, ok := set.Pending[c.name]; ok && p.SHA256 == c.sum {
					continue // quarantined (or warned) already
				}
				reason := "new"
				switch {
				case pinned:
					reason = "changed"
				case fresh || len(set.Pins) == 0 && mode == PinApproveFirst:
					reason = "first list"
				}
				set.Pending[c.name] = Pin{SHA256: c.sum, Definition: c.canon, Since: now, Reason: reason}
				kind := "quarantine"
				if mode == PinWarn {
					kind = "warn"
				}
				events = append(events, pinEvent{kind: kind, tool: c.name, sum: c.sum, prev: pin.SHA256, reason: reason})
				changed = true
			}
			for name := range set.Pending {
				if !listed[name] { // nothing left to approve
					delete(set.Pending, name)
					changed = true
				}
			}
			return set, changed, nil
		})
	}
	ps.held, ps.warned, ps.err = map[string]string{}, 0, ""
	if err != nil {
		// Unknown pins: nothing is trusted (warn lists everything anyway).
		ps.err = err.Error()
		u.m.log.Error("upstream.pin.store", "upstream", u.cfg.name, "error", err)
		set = nil
	} else {
		ps.set = set
		if st, err := u.m.pinStore.Stamp(u.cfg.name); err == nil {
			ps.stamp = st
		}
	}
	out := make([]json.RawMessage, 0, len(raws))
	skip := make(map[int]bool, len(cands))
	for _, c := range cands {
		var ok bool
		if set != nil {
			ok = set.Pins[c.name].SHA256 == c.sum
		}
		switch {
		case ok:
		case mode == PinWarn:
			ps.warned++
		default:
			ps.held[c.runtime] = c.name
			skip[c.i] = true
		}
	}
	for i, raw := range raws {
		if !skip[i] {
			out = append(out, raw)
		}
	}
	for _, e := range events {
		u.pinEvent(e)
	}
	return out
}

// pinEvent logs and audits one pin event.
func (u *upstream) pinEvent(e pinEvent) {
	rt := RuntimeName(u.cfg.name, e.tool)
	attrs := []any{"upstream", u.cfg.name, "tool", e.tool, "reason", e.reason, "sha256", e.sum}
	switch e.kind {
	case "quarantine":
		u.m.log.Warn("upstream.tool.quarantined", append(attrs, "approve", approveHint(u.cfg.name, e.tool))...)
	case "warn":
		u.m.log.Warn("upstream.tool.unapproved", append(attrs, "pin", PinWarn, "approve", approveHint(u.cfg.name, e.tool))...)
	case "pin":
		u.m.log.Info("upstream.tool.pinned", attrs...)
	}
	u.m.auditPin(e, u.cfg.name, rt)
}

// auditPin writes a pin event's audit record: tool "upstream.<kind>"
// with the upstream, tool, hashes and reason as its arguments.
func (m *Module) auditPin(e pinEvent, server, runtime string) {
	args, _ := json.Marshal(map[string]string{"upstream": server, "tool": e.tool, "runtime_name": runtime,
		"sha256": e.sum, "previous_sha256": e.prev, "reason": e.reason})
	by := e.by
	if by == "" {
		by = "bub-mcp"
	}
	m.app.Audit(audit.Record{Principal: by, Transport: "upstream", Mode: "pin", Tool: "upstream." + e.kind, Args: args, Outcome: "ok"})
}

func approveHint(server, tool string) string {
	return fmt.Sprintf("bub-mcp upstreams diff %s; bub-mcp upstreams approve %s %s", server, server, shellQuote(tool))
}

// shellQuote quotes a tool name for a command line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ExplainUnknownTool tells the caller of a quarantined tool why it cannot
// be called and how a human approves it.
func (m *Module) ExplainUnknownTool(name string, visible func(runtimeName string) bool) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, ".", "_")) }
	want := norm(name)
	m.pinMu.Lock()
	defer m.pinMu.Unlock()
	for server, ps := range m.pins {
		ps.mu.Lock()
		for rt, tool := range ps.held {
			if norm(rt) == want && visible(rt) {
				reason := "it is new"
				if ps.set != nil {
					if _, pinned := ps.set.Pins[tool]; pinned {
						reason = "its definition changed since it was approved"
					}
				}
				if ps.err != "" {
					reason = "the pins could not be read (" + ps.err + ")"
				}
				ps.mu.Unlock()
				return fmt.Sprintf("tool '%s' of upstream %s is quarantined: %s, and a human must approve it before it can be called. "+
					"Review it with `bub-mcp upstreams diff %s`, then accept it with `bub-mcp upstreams approve %s %s`.",
					name, server, reason, server, server, shellQuote(tool))
			}
		}
		ps.mu.Unlock()
	}
	return ""
}

// watchPins re-registers a server's last tool list when its pins change
// under it (an approval by `bub-mcp upstreams approve`), so approved
// tools are listed and callable without a restart.
func (m *Module) watchPins(ctx context.Context) {
	t := time.NewTicker(pinPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, u := range m.list() {
			if u.cfg.pinMode() == PinOff {
				continue
			}
			st, err := m.pinStore.Stamp(u.cfg.name)
			if err != nil {
				continue
			}
			ps := m.pinStateOf(u.cfg.name)
			ps.mu.Lock()
			stale := st != ps.stamp && ps.raws != nil
			raws := ps.raws
			ps.mu.Unlock()
			if !stale {
				continue
			}
			m.readmit(u, raws)
		}
	}
}

// readmit registers raws again after the pins changed.
func (m *Module) readmit(u *upstream, raws []json.RawMessage) {
	if err := u.register(raws); err != nil {
		m.log.Error("upstream.tools.refused", "upstream", u.cfg.name, "error", err)
	}
}

// byName is the mounted upstream of that name.
func (m *Module) byName(name string) (*upstream, bool) {
	for _, u := range m.list() {
		if u.cfg.name == name {
			return u, true
		}
	}
	return nil, false
}

// upstreamNamed is byName, with an error naming the configured servers.
func (m *Module) upstreamNamed(name string) (*upstream, error) {
	if u, ok := m.byName(name); ok {
		return u, nil
	}
	ups := m.list()
	names := make([]string, len(ups))
	for i, u := range ups {
		names[i] = u.cfg.name
	}
	return nil, fmt.Errorf("no upstream server %q (configured: %s)", name, strings.Join(names, ", "))
}

// Approve accepts the pending definitions of a server's tools (all of
// them when tools is empty; a tool is named as the upstream names it, or
// by its runtime or model name), pins them and audits each approval with
// by as the principal. A running server picks the new pins up within
// pinPoll; this process re-registers at once. It returns the upstream
// tool names approved.
func (m *Module) Approve(server string, tools []string, by string) ([]string, error) {
	u, err := m.upstreamNamed(server)
	if err != nil {
		return nil, err
	}
	if u.cfg.pinMode() == PinOff {
		return nil, fmt.Errorf("upstream %s: pin = %q: nothing is pinned", server, PinOff)
	}
	var approved []string
	var events []pinEvent
	now := time.Now()
	err = m.pinStore.Update(server, func(set *PinSet) (*PinSet, bool, error) {
		approved, events = nil, nil
		if set == nil || len(set.Pending) == 0 {
			return set, false, fmt.Errorf("upstream %s: no tool awaits approval", server)
		}
		names := tools
		if len(names) == 0 {
			names = slices.Sorted(maps.Keys(set.Pending))
		}
		var unknown []string
		for _, n := range names {
			tool, ok := pendingNamed(set, server, n)
			if !ok {
				unknown = append(unknown, n)
				continue
			}
			p := set.Pending[tool]
			prev := set.Pins[tool].SHA256
			set.Pins[tool] = Pin{SHA256: p.SHA256, Definition: p.Definition, Since: now, By: by}
			delete(set.Pending, tool)
			approved = append(approved, tool)
			events = append(events, pinEvent{kind: "approve", tool: tool, sum: p.SHA256, prev: prev, reason: p.Reason, by: by})
		}
		if len(unknown) > 0 {
			return set, false, fmt.Errorf("upstream %s: no pending definition of %s (awaiting approval: %s)", server,
				strings.Join(unknown, ", "), strings.Join(slices.Sorted(maps.Keys(set.Pending)), ", "))
		}
		return set, true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		m.auditPin(e, server, RuntimeName(server, e.tool))
		m.log.Info("upstream.tool.approved", "upstream", server, "tool", e.tool, "sha256", e.sum, "by", by)
	}
	ps := m.pinStateOf(server)
	ps.mu.Lock()
	raws := ps.raws
	ps.mu.Unlock()
	if raws != nil {
		m.readmit(u, raws)
	}
	return approved, nil
}

// pendingNamed finds a pending tool by its upstream, runtime or model
// name.
func pendingNamed(set *PinSet, server, name string) (string, bool) {
	if _, ok := set.Pending[name]; ok {
		return name, true
	}
	for tool := range set.Pending {
		rt := RuntimeName(server, tool)
		if name == rt || name == strings.ReplaceAll(rt, ".", "_") {
			return tool, true
		}
	}
	return "", false
}

// ToolChange is one definition awaiting approval.
type ToolChange struct {
	Tool   string `json:"tool"`
	Reason string `json:"reason"` // "changed", "new" or "first list"
	// Pinned and Current are the canonical definitions (Pinned empty for
	// a new tool); Diff is a unified diff of the two, indented.
	Pinned  json.RawMessage `json:"pinned,omitempty"`
	Current json.RawMessage `json:"current"`
	Diff    string          `json:"diff"`
}

// PinDiff shows what awaits approval on a server: each pending tool's
// unified diff against its pinned definition (a new tool whole), and,
// for new tools, the pinned tools the server no longer lists (a rename
// looks like one of each).
func (m *Module) PinDiff(server string) (changes []ToolChange, gone []string, err error) {
	if _, err := m.upstreamNamed(server); err != nil {
		return nil, nil, err
	}
	set, err := m.pinStore.Load(server)
	if err != nil || set == nil {
		return nil, nil, err
	}
	for _, tool := range slices.Sorted(maps.Keys(set.Pending)) {
		p := set.Pending[tool]
		c := ToolChange{Tool: tool, Reason: p.Reason, Current: p.Definition}
		old := set.Pins[tool]
		c.Pinned = old.Definition
		oldName, newName := "/dev/null", server+"/"+tool+" (current sha256:"+p.SHA256[:12]+")"
		if old.SHA256 != "" {
			oldName = server + "/" + tool + " (pinned sha256:" + old.SHA256[:12] + ")"
		}
		c.Diff = unifiedDiff(oldName, newName, indentLines(old.Definition), indentLines(p.Definition), 3)
		changes = append(changes, c)
	}
	ps := m.pinStateOf(server)
	ps.mu.Lock()
	listed := slices.Clone(ps.listed)
	seen := ps.raws != nil
	ps.mu.Unlock()
	if seen {
		for _, tool := range slices.Sorted(maps.Keys(set.Pins)) {
			if !slices.Contains(listed, tool) {
				gone = append(gone, tool)
			}
		}
	}
	return changes, gone, nil
}

// indentLines is canonical JSON indented, one line each, for a diff.
func indentLines(canon json.RawMessage) []string {
	if len(canon) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Indent(&b, canon, "", "  ") != nil {
		return []string{string(canon)}
	}
	return strings.Split(b.String(), "\n")
}

// pinCounts is what Status shows of a server's pins.
func (m *Module) pinCounts(name string) (quarantined, unapproved int) {
	m.pinMu.Lock()
	ps := m.pins[name]
	m.pinMu.Unlock()
	if ps == nil {
		return 0, 0
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.held), ps.warned
}

// maxDiffLines bounds the lines a diff compares with the quadratic
// longest-common-subsequence table; longer definitions are shown as
// removed and added whole.
const maxDiffLines = 4000

// unifiedDiff is a unified diff (context lines around each change) of
// two line lists.
func unifiedDiff(aName, bName string, a, b []string, context int) string {
	type op struct {
		kind   byte // ' ', '-', '+'
		line   string
		ai, bi int
	}
	var ops []op
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		for i, l := range a {
			ops = append(ops, op{'-', l, i, 0})
		}
		for j, l := range b {
			ops = append(ops, op{'+', l, len(a), j})
		}
	} else {
		// lcs[i][j] is the LCS length of a[i:] and b[j:].
		lcs := make([][]int32, len(a)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(b)+1)
		}
		for i := len(a) - 1; i >= 0; i-- {
			for j := len(b) - 1; j >= 0; j-- {
				if a[i] == b[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(a) || j < len(b) {
			switch {
			case i < len(a) && j < len(b) && a[i] == b[j]:
				ops = append(ops, op{' ', a[i], i, j})
				i++
				j++
			case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
				ops = append(ops, op{'+', b[j], i, j})
				j++
			default:
				ops = append(ops, op{'-', a[i], i, j})
				i++
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from context lines before the change to context lines
		// after the last change that is within 2*context of the next.
		start := max(k-context, 0)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		var an, bn int
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				an++
			}
			if o.kind != '-' {
				bn++
			}
		}
		as, bs := ops[start].ai+1, ops[start].bi+1
		if an == 0 {
			as--
		}
		if bn == 0 {
			bs--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", as, an, bs, bn)
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.line)
			out.WriteByte('\n')
		}
		k = end
	}
	return out.String()
}
