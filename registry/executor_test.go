package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newExec(t testing.TB, opts *ExecutorOptions, tools ...*Tool) *Executor {
	t.Helper()
	r := New()
	for _, tool := range tools {
		r.MustRegister(tool)
	}
	if opts == nil {
		opts = &ExecutorOptions{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return NewExecutor(r, opts)
}

func errText(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Error()
}

func TestValidation(t *testing.T) {
	e := newExec(t, nil, orderTool(t))
	tests := []struct {
		name    string
		args    string
		lax     bool
		wantErr bool
		wantLoc string
		want    string
	}{
		{"ok with defaults", `{"order_id":"A1","amount":2}`, false, false, "", `{"id":"A1","status":"fast/x"}`},
		{"missing required", `{"amount":2}`, false, true, "/order_id", ""},
		{"wrong type", `{"order_id":"A1","amount":"2"}`, false, true, "/amount", ""},
		{"lax coerces", `{"order_id":"A1","amount":"2.5","count":"3","verbose":"true"}`, true, false, "", `{"id":"A1","status":"fast/xxx"}`},
		{"lax keeps bad strings", `{"order_id":"A1","amount":"two"}`, true, true, "/amount", ""},
		{"enum", `{"order_id":"A1","amount":1,"mode":"warp"}`, false, true, "/mode", ""},
		{"minimum", `{"order_id":"A1","amount":1,"count":0}`, false, true, "/count", ""},
		{"maximum", `{"order_id":"A1","amount":1,"count":11}`, false, true, "/count", ""},
		{"exclusive minimum", `{"order_id":"A1","amount":0}`, false, true, "/amount", ""},
		{"pattern", `{"order_id":"a1","amount":1}`, false, true, "/order_id", ""},
		{"max items", `{"order_id":"A1","amount":1,"tags":["a","b","c","d"]}`, false, true, "/tags", ""},
		{"unknown property", `{"order_id":"A1","amount":1,"bogus":1}`, false, true, "", ""},
		{"nested required", `{"order_id":"A1","amount":1,"item":{}}`, false, true, "/item/sku", ""},
		{"not an object", `[1,2]`, false, true, "", ""},
		{"not json", `{"order_id":`, false, true, "", ""},
	}
	for _, tt := range tests {
		for _, decoded := range []bool{false, true} {
			name := tt.name
			if decoded {
				name += "/decoded"
			}
			t.Run(name, func(t *testing.T) {
				c := Call{Tool: "orders_get", Args: json.RawMessage(tt.args), Lax: tt.lax}
				var before map[string]any
				if decoded {
					// What the MCP layer hands over: Args with its decoding.
					if json.Unmarshal(c.Args, &c.Decoded) != nil {
						t.Skip("arguments are not an object")
					}
					json.Unmarshal(c.Args, &before)
				}
				res := e.Call(context.Background(), c)
				if decoded && !cmp.Equal(before, c.Decoded) {
					t.Errorf("Decoded was modified: %v, was %v", c.Decoded, before)
				}
				checkValidation(t, tt.args, tt.wantErr, tt.wantLoc, tt.want, res)
			})
		}
	}
}

func checkValidation(t *testing.T, args string, wantErr bool, wantLoc, want string, res Result) {
	t.Helper()
	if wantErr {
		if res.Err == nil {
			t.Fatalf("Call(%s) succeeded with %q; want invalid_input", args, res.Text)
		}
		if res.Err.Kind != KindInvalidInput || res.Err.Message != "Tool 'orders_get' argument validation failed." {
			t.Errorf("err = %v; want invalid_input validation message", res.Err)
		}
		errs, _ := res.Err.Details["errors"].([]any)
		if len(errs) == 0 {
			t.Fatalf("no validator details in %v", res.Err.Details)
		}
		found := false
		for _, x := range errs {
			m := x.(map[string]any)
			if m["loc"] == wantLoc && m["msg"] != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("details %v lack an error at %q", errs, wantLoc)
		}
		return
	}
	if res.Err != nil {
		t.Fatalf("Call(%s) err = %v", args, res.Err)
	}
	if diff := cmp.Diff(want, res.Text); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
}

func TestRender(t *testing.T) {
	type out struct {
		Text string `json:"text"`
	}
	structured := func(ctx context.Context, tc *ToolContext, in struct{}) (out, error) { return out{"<a & b> ü"}, nil }
	tests := []struct {
		name string
		opts []Option
		raw  bool
		want string
		val  any
	}{
		{"json without html escaping", nil, false, `{"text":"<a & b> ü"}`, out{"<a & b> ü"}},
		{"renderer", []Option{WithRenderer(func(o out) string { return "rendered: " + o.Text })}, false, "rendered: <a & b> ü", out{"<a & b> ü"}},
		{"raw keeps the value", []Option{WithRenderer(func(o out) string { return "unused" })}, true, "", out{"<a & b> ü"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := NewTool("r", "", structured, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			res := newExec(t, &ExecutorOptions{Raw: tt.raw}, tool).Call(context.Background(), Call{Tool: "r"})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if res.Text != tt.want {
				t.Errorf("Text = %q; want %q", res.Text, tt.want)
			}
			if diff := cmp.Diff(tt.val, res.Value); diff != "" {
				t.Errorf("Value (-want +got):\n%s", diff)
			}
		})
	}
	for _, c := range []struct {
		v    any
		want string
	}{{"plain", "plain"}, {nil, "null"}, {42, "42"}, {map[string]any{"k": []int{1}}, `{"k":[1]}`}, {Contents{{Type: "text", Text: "a"}, {Type: "image", MIMEType: "image/png", Data: []byte{1, 2}}}, "a\n[image: image/png, 2 bytes]"}} {
		if got, err := Render(nil, c.v); err != nil || got != c.want {
			t.Errorf("Render(%v) = %q, %v; want %q", c.v, got, err, c.want)
		}
	}
}

// TestRenderNotJSON checks that a direct call whose result JSON cannot
// carry answers with the value's text form (Bub's str(result)) instead of
// failing, and that a value referring to itself is named, not printed
// until the stack overflows.
func TestRenderNotJSON(t *testing.T) {
	cycle := map[string]any{"a": 1}
	cycle["self"] = cycle
	type pair struct {
		N float64
		C chan int
	}
	var ch chan int
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"NaN", math.NaN(), "NaN"},
		{"infinity in a map", map[string]any{"v": math.Inf(1)}, "map[v:+Inf]"},
		{"channel", ch, "<nil>"},
		{"function", map[string]any{"f": (func())(nil)}, "map[f:<nil>]"},
		{"struct with NaN", pair{N: math.NaN()}, "{NaN <nil>}"},
		{"cyclic map", cycle, "<map[string]interface {} value with a reference cycle>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := NewRawTool("weird", "", json.RawMessage(`{"type":"object"}`), func(ctx context.Context, tc *ToolContext, args json.RawMessage) (any, error) {
				return tt.v, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			res := newExec(t, nil, tool).Call(context.Background(), Call{Tool: "weird"})
			if res.Err != nil {
				t.Fatalf("Call = %v; want the text form", res.Err)
			}
			if res.Text != tt.want {
				t.Errorf("Text = %q; want %q", res.Text, tt.want)
			}
		})
	}
}

func TestHandlerFailures(t *testing.T) {
	boom, _ := NewTool("boom", "", func(ctx context.Context, tc *ToolContext, in struct {
		Mode string `json:"mode"`
	}) (string, error) {
		switch in.Mode {
		case "panic":
			panic("kaboom")
		case "error":
			return "", errors.New("disk on fire")
		case "typed":
			return "", NewError(KindNotFound, "order not found", map[string]any{"id": "A1"})
		}
		return "fine", nil
	})
	e := newExec(t, nil, boom)
	tests := []struct {
		mode, want, detail string
	}{
		{"panic", "[tool] Tool 'boom' execution failed.", "panic: kaboom"},
		{"error", "[tool] Tool 'boom' execution failed.", "disk on fire"},
		{"typed", "[not_found] order not found", ""},
	}
	for _, tt := range tests {
		res := e.Call(context.Background(), Call{Tool: "boom", Args: json.RawMessage(`{"mode":"` + tt.mode + `"}`)})
		if got := errText(res.Err); got != tt.want {
			t.Errorf("mode %s: err = %q; want %q", tt.mode, got, tt.want)
		}
		if tt.detail != "" && res.Err.Details["error"] != tt.detail {
			t.Errorf("mode %s: details = %v; want error %q", tt.mode, res.Err.Details, tt.detail)
		}
		if res.Output() != res.Err.JSON() {
			t.Errorf("Output() = %q; want the error JSON", res.Output())
		}
	}
}

// recorder collects which hooks ran, in order.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.log = append(r.log, s); r.mu.Unlock() }

func TestHooks(t *testing.T) {
	type hookSpec struct {
		name   string
		before func(*ToolCall) Decision
		after  func(*ToolCall, *Result)
	}
	tests := []struct {
		name     string
		hooks    []hookSpec // registration order
		args     string
		wantText string
		wantErr  string
		wantLog  []string
	}{
		{
			name:     "LIFO order, all proceed",
			hooks:    []hookSpec{{name: "builtin"}, {name: "plugin"}},
			args:     `{"message":"hi"}`,
			wantText: "Echo: hi",
			wantLog:  []string{"before plugin", "before builtin", "after plugin Echo: hi", "after builtin Echo: hi"},
		},
		{
			name: "rewrite arguments for later hooks and the handler",
			hooks: []hookSpec{{name: "builtin"}, {name: "rewriter", before: func(c *ToolCall) Decision {
				return ProceedWith(json.RawMessage(`{"message":"rewritten"}`))
			}}},
			args:     `{"message":"hi"}`,
			wantText: "Echo: rewritten",
			wantLog:  []string{"before rewriter", "before builtin {\"message\":\"rewritten\"}", "after rewriter Echo: rewritten", "after builtin Echo: rewritten"},
		},
		{
			name:    "deny with default message stops the chain",
			hooks:   []hookSpec{{name: "builtin"}, {name: "policy", before: func(*ToolCall) Decision { return Deny("") }}},
			args:    `{"message":"hi"}`,
			wantErr: "[tool] Tool 'test.echo' call denied by policy hook.",
			wantLog: []string{"before policy", "after policy err", "after builtin err"},
		},
		{
			name:    "deny with message",
			hooks:   []hookSpec{{name: "policy", before: func(*ToolCall) Decision { return Deny("not on Sundays") }}},
			args:    `{"message":"hi"}`,
			wantErr: "[tool] not on Sundays",
			wantLog: []string{"before policy", "after policy err"},
		},
		{
			name:     "replace skips the handler and validation",
			hooks:    []hookSpec{{name: "builtin"}, {name: "cache", before: func(*ToolCall) Decision { return Replace("cached") }}},
			args:     `{}`,
			wantText: "cached",
			wantLog:  []string{"before cache", "after cache cached", "after builtin cached"},
		},
		{
			name: "after hook changes what the model sees",
			hooks: []hookSpec{{name: "redact", after: func(c *ToolCall, r *Result) {
				r.Text = strings.ReplaceAll(r.Text, "secret", "***")
			}}},
			args:     `{"message":"secret"}`,
			wantText: "Echo: ***",
			wantLog:  []string{"before redact", "after redact Echo: ***"},
		},
		{
			name: "panicking hooks are skipped",
			hooks: []hookSpec{
				{name: "builtin"},
				{name: "bad", before: func(*ToolCall) Decision { panic("before") }, after: func(*ToolCall, *Result) { panic("after") }},
			},
			args:     `{"message":"hi"}`,
			wantText: "Echo: hi",
			wantLog:  []string{"before bad", "before builtin", "after builtin Echo: hi"},
		},
		{
			name:    "validation errors reach after hooks",
			hooks:   []hookSpec{{name: "builtin"}},
			args:    `{"message":""}`,
			wantErr: "[invalid_input] Tool 'test_echo' argument validation failed.",
			wantLog: []string{"before builtin", "after builtin err"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			r := New()
			r.MustRegister(echoTool(t))
			for _, h := range tt.hooks {
				r.AddHooks(Hooks{
					Name: h.name,
					Before: func(ctx context.Context, c *ToolCall) Decision {
						if string(c.Args) != tt.args { // show rewritten arguments
							rec.add("before " + h.name + " " + string(c.Args))
						} else {
							rec.add("before " + h.name)
						}
						if c.Name != "test_echo" {
							t.Errorf("hook saw name %q; want model name test_echo", c.Name)
						}
						if h.before != nil {
							return h.before(c)
						}
						return Proceed()
					},
					After: func(ctx context.Context, c *ToolCall, res *Result) {
						if h.after != nil {
							h.after(c, res)
						}
						if res.Err != nil {
							rec.add("after " + h.name + " err")
						} else if res.Text == "" {
							rec.add("after " + h.name)
						} else {
							rec.add("after " + h.name + " " + res.Text)
						}
					},
				})
			}
			e := NewExecutor(r, &ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
			res := e.Call(context.Background(), Call{Tool: "test.echo", Args: json.RawMessage(tt.args)})
			if got := errText(res.Err); got != tt.wantErr {
				t.Errorf("err = %q; want %q", got, tt.wantErr)
			}
			if res.Text != tt.wantText {
				t.Errorf("text = %q; want %q", res.Text, tt.wantText)
			}
			if diff := cmp.Diff(tt.wantLog, rec.log); diff != "" {
				t.Errorf("hook log (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHooksSeeCodeModeAndBuiltinHooksRunLast(t *testing.T) {
	rec := &recorder{}
	r := New()
	r.MustRegister(echoTool(t))
	r.AddHooks(Hooks{Name: "registry", Before: func(ctx context.Context, c *ToolCall) Decision {
		rec.add(fmt.Sprintf("registry code_mode=%v", c.Context.CodeMode))
		return Proceed()
	}})
	e := NewExecutor(r, &ExecutorOptions{Raw: true, Logger: slog.New(slog.DiscardHandler), Hooks: []Hooks{{Name: "extra", Before: func(ctx context.Context, c *ToolCall) Decision {
		rec.add("extra")
		return Proceed()
	}}}})
	res := e.Call(context.Background(), Call{Tool: "test_echo", Args: json.RawMessage(`{"message":"x"}`), Context: &ToolContext{CodeMode: true}})
	if res.Err != nil || res.Value != "Echo: x" || res.Text != "" {
		t.Errorf("raw call = %+v", res)
	}
	if diff := cmp.Diff([]string{"registry code_mode=true", "extra"}, rec.log); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCancellation(t *testing.T) {
	started := make(chan struct{})
	slow, _ := NewTool("slow", "", func(ctx context.Context, tc *ToolContext, in struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	afterRan := atomic.Bool{}
	r := New()
	r.MustRegister(slow)
	r.AddHooks(Hooks{After: func(context.Context, *ToolCall, *Result) { afterRan.Store(true) }})
	e := NewExecutor(r, &ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res := e.Call(ctx, Call{Tool: "slow"})
	if res.Err == nil || !errors.Is(res.Err, context.Canceled) || res.Err.Message != "Tool 'slow' call was cancelled." {
		t.Errorf("err = %v; want cancellation", res.Err)
	}
	if afterRan.Load() {
		t.Error("after hook ran for a cancelled call")
	}
}

func TestCallManyOrderAndLimit(t *testing.T) {
	var inFlight, peak atomic.Int64
	gate := make(chan struct{})
	work, _ := NewTool("work", "", func(ctx context.Context, tc *ToolContext, in struct {
		N int `json:"n"`
	}) (int, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-gate
		inFlight.Add(-1)
		return in.N * 10, nil
	})
	for _, limit := range []int{1, 3, 0} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			peak.Store(0)
			gate = make(chan struct{})
			e := newExec(t, &ExecutorOptions{MaxConcurrency: limit}, work)
			calls := make([]Call, 8)
			for i := range calls {
				calls[i] = Call{Tool: "work", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
			}
			want := 8
			if limit > 0 {
				want = limit
			}
			done := make(chan []Result)
			go func() { done <- e.CallMany(context.Background(), calls) }()
			// Wait until the limit is reached, then check it is never exceeded.
			deadline := time.After(10 * time.Second)
			for inFlight.Load() < int64(want) {
				select {
				case <-deadline:
					t.Fatalf("only %d calls started; want %d", inFlight.Load(), want)
				default:
					time.Sleep(time.Millisecond)
				}
			}
			close(gate)
			results := <-done
			if got := peak.Load(); got != int64(want) {
				t.Errorf("peak concurrency = %d; want %d", got, want)
			}
			for i, r := range results {
				if r.Err != nil || r.Text != fmt.Sprint(i*10) {
					t.Errorf("result %d = %q, %v; want %d", i, r.Text, r.Err, i*10)
				}
			}
		})
	}
}

// captureHandler records log records for assertions.
type captureHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func TestTimingLog(t *testing.T) {
	h := &captureHandler{}
	e := newExec(t, &ExecutorOptions{Logger: slog.New(h)}, echoTool(t))
	long := strings.Repeat("y", 150)
	e.Call(context.Background(), Call{Tool: "test.echo", Args: json.RawMessage(`{"message":"` + long + `"}`)})
	e.Call(context.Background(), Call{Tool: "test.echo", Args: json.RawMessage(`{"message":""}`)})
	var got []string
	for _, r := range h.recs {
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "elapsed_time" {
				line += " " + a.Key + "=" + a.Value.String()
			} else if a.Value.Duration() <= 0 {
				line += " elapsed_time=0"
			}
			return true
		})
		got = append(got, line)
	}
	want := []string{
		`tool.call.start name=test.echo args={ message="` + strings.Repeat("y", 99) + `... }`,
		"tool.call.success name=test.echo",
		`tool.call.start name=test.echo args={ message="" }`,
		"tool.call.error name=test.echo error=[invalid_input] Tool 'test_echo' argument validation failed.",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func BenchmarkExecutorCall(b *testing.B) {
	e := newExec(b, nil, echoTool(b))
	call := Call{Tool: "test.echo", Args: json.RawMessage(`{"message":"hello"}`), Context: &ToolContext{Conn: &Connection{SessionKey: "s"}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := e.Call(ctx, call)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

func BenchmarkExecutorCallStructured(b *testing.B) {
	e := newExec(b, nil, orderTool(b))
	call := Call{Tool: "orders_get", Args: json.RawMessage(`{"order_id":"A1","amount":2,"mode":"slow","count":2}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := e.Call(ctx, call); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// TestValidationDetails: one error per bad value, located at the
// property (a missing one too), naming the tool as the caller knows it;
// lax coercion turns "1" and "true" into their types for every caller.
func TestValidationDetails(t *testing.T) {
	type readIn struct {
		Path   string `json:"path"`
		Offset int    `json:"offset,omitempty"`
		Limit  *int   `json:"limit,omitempty" jsonschema:"nullable"`
		Bold   bool   `json:"bold,omitempty"`
	}
	tool := MustNewTool("fs.read", "Read.", func(ctx context.Context, tc *ToolContext, in readIn) (string, error) {
		return fmt.Sprintf("%s %d %v %v", in.Path, in.Offset, *in.Limit, in.Bold), nil
	})
	type detail struct{ Loc, Msg string }
	tests := []struct {
		name, args   string
		runtimeNames bool
		wantMsg      string
		want         []detail
		wantText     string
	}{
		{name: "model call", args: `{"offset":"x","limit":"y"}`, wantMsg: "Tool 'fs_read' argument validation failed.", want: []detail{
			{"/limit", "got string, want integer or null"},
			{"/offset", "got string, want integer"},
			{"/path", "missing property 'path'"},
		}},
		{name: "command", args: `{"path":"a","limit":true}`, runtimeNames: true, wantMsg: "Tool 'fs.read' argument validation failed.", want: []detail{
			{"/limit", "got boolean, want integer or null"},
		}},
		{name: "lax", args: `{"path":"a","offset":"1","limit":"2","bold":"true"}`, wantText: "a 1 2 true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec(t, &ExecutorOptions{RuntimeNames: tt.runtimeNames}, tool)
			res := e.Call(context.Background(), Call{Tool: "fs.read", Args: json.RawMessage(tt.args), Lax: true})
			if tt.wantText != "" {
				if res.Err != nil || res.Text != tt.wantText {
					t.Fatalf("Call(%s) = %q, %v; want %q", tt.args, res.Text, res.Err, tt.wantText)
				}
				return
			}
			if res.Err == nil {
				t.Fatalf("Call(%s) succeeded; want a validation error", tt.args)
			}
			var got []detail
			for _, x := range res.Err.Details["errors"].([]any) {
				m := x.(map[string]any)
				got = append(got, detail{m["loc"].(string), m["msg"].(string)})
			}
			if res.Err.Message != tt.wantMsg {
				t.Errorf("message = %q; want %q", res.Err.Message, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIntegralNumbers checks that an integer argument spelled with a
// fraction or an exponent but an integral value (1.0, 2e0), which the
// schema and Bub's pydantic accept, reaches a typed handler as the
// integer, also inside lists; a real fraction is still refused.
func TestIntegralNumbers(t *testing.T) {
	type in struct {
		N    int     `json:"n"`
		List []int   `json:"list,omitempty"`
		F    float64 `json:"f,omitempty"`
	}
	tool := MustNewTool("ints", "", func(ctx context.Context, tc *ToolContext, in in) (in, error) { return in, nil })
	e := newExec(t, nil, tool)
	tests := []struct {
		args    string
		want    in
		wantErr string
	}{
		{args: `{"n":1}`, want: in{N: 1}},
		{args: `{"n":1.0}`, want: in{N: 1}},
		{args: `{"n":-3.00,"f":2.5}`, want: in{N: -3, F: 2.5}},
		{args: `{"n":2e0,"list":[1.0,4,5E1]}`, want: in{N: 2, List: []int{1, 4, 50}}},
		{args: `{"n":1.5}`, wantErr: "[invalid_input] Tool 'ints' argument validation failed."},
		{args: `{"n":1e300}`, wantErr: "[invalid_input] Tool 'ints' argument validation failed."},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			res := e.Call(context.Background(), Call{Tool: "ints", Args: json.RawMessage(tt.args)})
			if tt.wantErr != "" {
				if res.Err == nil || res.Err.Error() != tt.wantErr {
					t.Errorf("Call = %v, %v; want %s", res.Value, res.Err, tt.wantErr)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("Call: %v %v", res.Err, res.Err.Details)
			}
			if diff := cmp.Diff(tt.want, res.Value); diff != "" {
				t.Errorf("handler got (-want +got):\n%s", diff)
			}
		})
	}
}
