package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/internal/ident"
)

// Handler runs a tool. args is a JSON object that already passed the input
// schema. The returned value is the structured result; a non-nil error makes
// the call fail with kind "tool" unless the error is (or wraps) an *Error.
type Handler func(ctx context.Context, tc *ToolContext, args json.RawMessage) (any, error)

// Renderer turns a tool's structured result into the text a model reads.
type Renderer func(v any) (string, error)

// Annotations are the behaviour hints MCP clients use to decide how much to
// trust a call. They are always sent explicitly, because a missing hint means
// "destructive, open-world" to clients.
type Annotations struct {
	Title       string
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
}

// Tool is one callable unit. Build it with NewTool (typed, schemas reflected)
// or NewRawTool (schemas given), then register it.
type Tool struct {
	// Name is the runtime name, dotted namespaces allowed ("fs.read").
	Name string
	// Description is shown to models; it should say when to use the tool.
	Description string
	// InputSchema is a JSON Schema whose root has type "object".
	InputSchema json.RawMessage
	// OutputSchema describes the structured result; nil when unknown.
	OutputSchema json.RawMessage
	// Handler does the work.
	Handler Handler
	// Renderer turns the structured result into model text; nil renders
	// strings as-is and everything else as JSON.
	Renderer Renderer
	// Preserve keeps the tool directly callable in code mode (and out of
	// the code-mode stub): bash, fs.*, spill.read, run_code.
	Preserve bool
	// CommandOnly hides the tool from models; only humans call it, through
	// comma commands or `bub-mcp call`. Bub's agent_use=False.
	CommandOnly bool
	// Annotations are MCP behaviour hints.
	Annotations Annotations
	// Requires names the client capabilities the tool cannot work without
	// ("sampling", "elicitation", "roots"). On the 2026-07-28 wire a
	// request that does not declare one is refused with -32021 before the
	// tool runs; a tool that only sometimes asks leaves this empty and
	// handles the *CapabilityError its request returns.
	Requires []string
	// ClosesStream marks a tool that may end its HTTP response stream
	// mid-call and go on (mcpserver.CloseStream, SEP-1699 polling). Only
	// such a tool's calls on 2025-11-25 HTTP sessions are served apart
	// from their request, which is what lets the response end first; for
	// any other tool CloseStream reports false.
	ClosesStream bool
	// Deferred leaves the tool out of tools/list until a session loads its
	// definition (tool.describe); it stays callable by name, and in code
	// mode it is a code tool like any other. Bub 0.5's defer_loading.
	Deferred bool
	// Source is where a tool that is not Go code came from, such as an
	// upstream MCP server's definition of it. Transports that recognise
	// it (by an interface they define) may present the tool as its source
	// did, with hints and metadata this package does not model; nil for
	// tools written in Go.
	Source any

	// validator is compiled on the tool's first call, so start-up pays
	// only for checking the schema's root; copies of a Tool share it.
	validator *lazyValidator
}

// ModelName is the name models see: dots become underscores.
func (t *Tool) ModelName() string { return ModelName(t.Name) }

// compile prepares what calls need: the argument validator, compiled on
// first use. A schema that is not a JSON object schema is refused now.
func (t *Tool) compile() error {
	if err := checkSchemaRoot(t.Name, t.InputSchema); err != nil {
		return err
	}
	t.validator = &lazyValidator{tool: t.Name, schema: t.InputSchema}
	return nil
}

// lazyValidator compiles a validator once, on the first call that needs
// it: compiling every tool's schema at start would delay the first
// tools/list for calls that may never come.
type lazyValidator struct {
	tool   string
	schema json.RawMessage

	once sync.Once
	v    *validator
	err  error
}

func (l *lazyValidator) get() (*validator, error) {
	l.once.Do(func() { l.v, l.err = compileValidator(l.tool, l.schema) })
	return l.v, l.err
}

// AgentUse reports whether models may see and call the tool.
func (t *Tool) AgentUse() bool { return !t.CommandOnly }

// CodeUse reports whether the tool is reachable from run_code in code mode:
// visible to agents and not preserved as a direct tool.
func (t *Tool) CodeUse() bool { return !t.CommandOnly && !t.Preserve }

// ModelName converts a runtime name into the model-facing one.
func ModelName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// checkName rejects names models cannot call: the model name must match
// ^[a-zA-Z0-9_-]{1,64}$, the pattern every major model API enforces.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("registry: empty tool name")
	}
	if mn := ModelName(name); !ident.Word(mn) {
		return fmt.Errorf("registry: tool name %q: model name %q must match ^[a-zA-Z0-9_-]{1,64}$", name, mn)
	}
	return nil
}

// Option adjusts a tool under construction.
type Option func(*Tool)

// WithPreserve marks the tool as directly callable in code mode.
func WithPreserve() Option { return func(t *Tool) { t.Preserve = true } }

// WithClosesStream sets ClosesStream.
func WithClosesStream() Option { return func(t *Tool) { t.ClosesStream = true } }

// WithCommandOnly hides the tool from models (Bub's agent_use=False).
func WithCommandOnly() Option { return func(t *Tool) { t.CommandOnly = true } }

// WithAnnotations sets the MCP behaviour hints.
func WithAnnotations(a Annotations) Option { return func(t *Tool) { t.Annotations = a } }

// WithRenderer renders the tool's result with f. A value of another type
// (a hook may replace the result) falls back to the default rendering.
func WithRenderer[Out any](f func(Out) string) Option {
	return func(t *Tool) {
		t.Renderer = func(v any) (string, error) {
			if o, ok := v.(Out); ok {
				return f(o), nil
			}
			return defaultRender(v)
		}
	}
}

// WithOutputSchema overrides the output schema (for raw tools or when the
// reflected one is not precise enough).
func WithOutputSchema(schema json.RawMessage) Option {
	return func(t *Tool) { t.OutputSchema = schema }
}

// NewTool builds a tool from a typed function. In must be a struct (its
// fields are the arguments); both schemas are reflected once, here. Field
// descriptions and constraints come from `jsonschema` struct tags.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, tc *ToolContext, in In) (Out, error), opts ...Option) (*Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("registry: tool %q: nil handler", name)
	}
	inType := reflect.TypeFor[In]()
	if inType.Kind() != reflect.Struct {
		return nil, fmt.Errorf("registry: tool %q: input type %s is not a struct", name, inType)
	}
	in, err := ReflectSchema(inType)
	if err != nil {
		return nil, fmt.Errorf("registry: tool %q input: %w", name, err)
	}
	var out json.RawMessage
	if outType := reflect.TypeFor[Out](); outType.Kind() != reflect.Interface {
		if out, err = ReflectSchema(outType); err != nil {
			return nil, fmt.Errorf("registry: tool %q output: %w", name, err)
		}
	}
	h := func(ctx context.Context, tc *ToolContext, args json.RawMessage) (any, error) {
		var v In
		if len(args) > 0 {
			if err := json.Unmarshal(args, &v); err != nil {
				// The schema (and Bub's pydantic) take 1.0 as the
				// integer 1; encoding/json refuses it for an int field.
				// Only on that failure: integral numbers are respelled
				// and decoded again.
				fixed, ok := integralNumbers(args)
				if !ok || json.Unmarshal(fixed, &v) != nil {
					return nil, invalidInput(name, []any{map[string]any{"loc": "", "msg": err.Error()}}, err)
				}
			}
		}
		return fn(ctx, tc, v)
	}
	return NewRawTool(name, description, in, h, append([]Option{WithOutputSchema(out)}, opts...)...)
}

// MustNewTool is NewTool for init(): a bad type is a programmer's mistake.
func MustNewTool[In, Out any](name, description string, fn func(ctx context.Context, tc *ToolContext, in In) (Out, error), opts ...Option) *Tool {
	t, err := NewTool(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// NewRawTool builds a tool from a hand-written input schema, for tools whose
// shape is only known at run time (upstream MCP servers, fixtures).
func NewRawTool(name, description string, inputSchema json.RawMessage, h Handler, opts ...Option) (*Tool, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("registry: tool %q: nil handler", name)
	}
	if len(inputSchema) == 0 {
		inputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	t := &Tool{Name: name, Description: description, InputSchema: inputSchema, Handler: h}
	for _, o := range opts {
		o(t)
	}
	if err := t.compile(); err != nil {
		return nil, err
	}
	return t, nil
}

// checkArgs validates a call's arguments with the tool's validator,
// compiling it on first use. A schema that does not compile fails the
// call with a config error that names the tool, since no argument could
// pass it.
func (t *Tool) checkArgs(raw json.RawMessage, decoded map[string]any, lax bool, name string) (json.RawMessage, *Error) {
	lv := t.validator
	if lv == nil { // a Tool literal that was never registered: nothing to keep it in
		if err := checkSchemaRoot(t.Name, t.InputSchema); err != nil {
			return nil, &Error{Kind: KindConfig, Message: err.Error(), Cause: err}
		}
		lv = &lazyValidator{tool: t.Name, schema: t.InputSchema}
	}
	v, err := lv.get()
	if err != nil {
		return nil, &Error{Kind: KindConfig, Message: fmt.Sprintf("Tool '%s' has an input schema that cannot be compiled: %v", t.Name, err), Cause: err}
	}
	return v.check(raw, decoded, lax, name)
}

// integralNumbers respells the numbers of args that have a fraction or an
// exponent but an integral value (1.0, 2e0) as integers, for an int field;
// ok is false when there is none to respell. Values beyond 2^53 are left
// as they are: their integral value is not exact.
func integralNumbers(args json.RawMessage) (json.RawMessage, bool) {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var doc any
	if d.Decode(&doc) != nil {
		return nil, false
	}
	changed := false
	doc = mapNumbers(doc, func(n json.Number) any {
		if !strings.ContainsAny(string(n), ".eE") {
			return n
		}
		f, err := n.Float64()
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return n
		}
		changed = true
		return json.Number(strconv.FormatInt(int64(f), 10))
	})
	if !changed {
		return nil, false
	}
	b, err := marshalNoEscape(doc)
	if err != nil {
		return nil, false
	}
	return b, true
}
