package pystub

// Type rendering: schemas become Python type expressions, TypedDicts and
// function signatures.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bubbuild/bub-mcp/internal/pyrepr"
)

// maxTypeDepth bounds the nesting of one type expression; deeper parts
// become Any, which keeps the stub well within Python's parser limits.
const maxTypeDepth = 32

// member is one alternative of a union: a type expression, or (text empty)
// the Python literal of a Literal value.
type member struct {
	text string
	lit  string
}

// pyType is a union of members; it always has at least one.
type pyType []member

var anyType = pyType{{text: "Any"}}

func simple(text string) pyType { return pyType{{text: text}} }

// union joins alternatives in order, dropping duplicates; Any absorbs all.
func union(ts ...pyType) pyType {
	var out pyType
	seen := map[member]bool{}
	for _, t := range ts {
		for _, m := range t {
			if m.text == "Any" {
				return anyType
			}
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	if len(out) == 0 {
		return anyType
	}
	return out
}

// String renders the union; Literal values are gathered into one Literal at
// the place of the first.
func (t pyType) String() string {
	var parts, lits []string
	litAt := -1
	for _, m := range t {
		if m.text != "" {
			parts = append(parts, m.text)
			continue
		}
		if litAt < 0 {
			litAt = len(parts)
			parts = append(parts, "")
		}
		lits = append(lits, m.lit)
	}
	if litAt >= 0 {
		parts[litAt] = "Literal[" + strings.Join(lits, ", ") + "]"
	}
	return strings.Join(parts, " | ")
}

var scalarTypes = map[string]string{
	"string":  "str",
	"integer": "int",
	"number":  "float",
	"boolean": "bool",
	"null":    "None",
}

// builder turns schemas into type expressions and collects the TypedDicts
// they need. Inside type text a TypedDict is written as a token (NUL, its
// index, NUL) and replaced by its final name on output, so a class that turns
// out to duplicate an earlier one can be merged after being referenced.
type builder struct {
	classes []*class
	order   []int // emitted classes, dependencies first
	names   map[string]bool
	refs    map[*node]*refState
	depth   int
}

type class struct {
	name   string
	base   string // name before any numeric suffix
	doc    string // description of the object
	fields []classField
	alias  int    // the class this one was merged into, or -1
	shape  string // comparison key, set once complete
}

type classField struct {
	key, typ, doc string
}

func classToken(i int) string { return "\x00" + strconv.Itoa(i) + "\x00" }

func (b *builder) canon(i int) int {
	for b.classes[i].alias >= 0 {
		i = b.classes[i].alias
	}
	return i
}

// resolve replaces class tokens in s with f(index).
func resolve(s string, f func(int) string) string {
	if !strings.Contains(s, "\x00") {
		return s
	}
	var sb strings.Builder
	for {
		start := strings.IndexByte(s, 0)
		if start < 0 {
			break
		}
		end := strings.IndexByte(s[start+1:], 0)
		if end < 0 {
			break
		}
		i, err := strconv.Atoi(s[start+1 : start+1+end])
		if err != nil {
			break
		}
		sb.WriteString(s[:start])
		sb.WriteString(f(i))
		s = s[start+end+2:]
	}
	sb.WriteString(s)
	return sb.String()
}

func (b *builder) resolveNames(s string) string {
	return resolve(s, func(i int) string { return b.classes[b.canon(i)].name })
}

// typeOf converts schema s (found in the document root) to a Python type.
// hint names a TypedDict the schema may need; rs is the $ref being resolved
// when s is that ref's target.
func (b *builder) typeOf(s, root *node, hint string, rs *refState) pyType {
	if !s.isObject() || len(s.keys) == 0 || b.depth >= maxTypeDepth {
		return anyType
	}
	b.depth++
	defer func() { b.depth-- }()
	t := b.typeOfSchema(s, root, hint, rs)
	if n := s.get("nullable"); n != nil && n.kind == kindBool && n.b {
		t = union(t, simple("None"))
	}
	return t
}

func (b *builder) typeOfSchema(s, root *node, hint string, rs *refState) pyType {
	if ref := s.get("$ref"); ref != nil && ref.kind == kindString {
		return b.ref(ref.str, root)
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if opts := s.get(key); opts.isArray() && len(opts.items) > 0 {
			ts := make([]pyType, len(opts.items))
			for i, opt := range opts.items {
				ts[i] = b.typeOf(opt, root, hint, nil)
			}
			return union(ts...)
		}
	}
	if all := s.get("allOf"); all.isArray() && len(all.items) == 1 {
		return b.typeOf(all.items[0], root, hint, rs)
	}
	if c := s.get("const"); c != nil {
		return literalType([]*node{c})
	}
	if e := s.get("enum"); e.isArray() && len(e.items) > 0 {
		return literalType(e.items)
	}
	switch typ := s.get("type"); {
	case typ != nil && typ.kind == kindString:
		return b.typeOfKind(s, typ.str, root, hint, rs)
	case typ.isArray() && len(typ.items) > 0:
		var ts []pyType
		seen := map[string]bool{}
		for _, item := range typ.items {
			if item.kind != kindString {
				return anyType
			}
			if !seen[item.str] {
				seen[item.str] = true
				ts = append(ts, b.typeOfKind(s, item.str, root, hint, rs))
			}
		}
		return union(ts...)
	case typ == nil && s.get("properties").isObject():
		return b.typeOfKind(s, "object", root, hint, rs)
	case typ == nil && (s.get("items") != nil || s.get("prefixItems") != nil):
		return b.typeOfKind(s, "array", root, hint, rs)
	}
	return anyType
}

// typeOfKind converts s as a schema of the single JSON type kind.
func (b *builder) typeOfKind(s *node, kind string, root *node, hint string, rs *refState) pyType {
	switch kind {
	case "array":
		prefix := s.get("prefixItems")
		if !prefix.isArray() && s.get("items").isArray() { // draft 4 tuples
			prefix = s.get("items")
		}
		if prefix.isArray() {
			if len(prefix.items) == 0 {
				return simple("tuple[()]")
			}
			parts := make([]string, len(prefix.items))
			for i, item := range prefix.items {
				parts[i] = b.typeOf(item, root, hint+"Item", nil).String()
			}
			return simple("tuple[" + strings.Join(parts, ", ") + "]")
		}
		return simple("list[" + b.typeOf(s.get("items"), root, hint+"Item", nil).String() + "]")
	case "object":
		if props := s.get("properties"); props.isObject() && len(props.keys) > 0 {
			return b.typedDict(s, props, root, hint, rs)
		}
		if extra := s.get("additionalProperties"); extra.isObject() && len(extra.keys) > 0 {
			return simple("dict[str, " + b.typeOf(extra, root, hint+"Value", nil).String() + "]")
		}
		return simple("dict[str, Any]")
	}
	if py, ok := scalarTypes[kind]; ok {
		return simple(py)
	}
	return anyType
}

// typedDict declares (or reuses) the TypedDict for an object schema.
func (b *builder) typedDict(s, props, root *node, hint string, rs *refState) pyType {
	base := pascal(s.get("title").text())
	if base == "" {
		base = pascal(hint)
	}
	if base == "" {
		base = "Result"
	}
	base = Identifier(base)
	name := base
	for i := 2; b.names[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	b.names[name] = true
	slot := len(b.classes)
	c := &class{name: name, base: base, doc: s.get("description").text(), alias: -1}
	b.classes = append(b.classes, c)
	if rs != nil && rs.slot < 0 {
		rs.slot = slot
	}

	required := requiredSet(s)
	for i, key := range props.keys {
		p := props.vals[i]
		typ := b.typeOf(p, root, name+pascal(key), nil).String()
		if !required[key] {
			typ = "NotRequired[" + typ + "]"
		}
		c.fields = append(c.fields, classField{key: key, typ: typ, doc: p.get("description").text()})
	}

	shape := b.shape(slot)
	for _, other := range b.order {
		if o := b.classes[other]; o.base == base && o.shape == shape {
			c.alias = other
			delete(b.names, name)
			if rs != nil && rs.slot == slot {
				rs.slot = other
			}
			return simple(classToken(other))
		}
	}
	c.shape = shape
	b.order = append(b.order, slot)
	return simple(classToken(slot))
}

// shape is what two classes must share to be merged: everything but the name.
func (b *builder) shape(i int) string {
	c := b.classes[i]
	var sb strings.Builder
	sb.WriteString(pyrepr.String(c.doc))
	for _, f := range c.fields {
		sb.WriteString("\x01" + pyrepr.String(f.key) + "\x01" + f.typ + "\x01" + pyrepr.String(f.doc))
	}
	return resolve(sb.String(), func(j int) string {
		if j = b.canon(j); j == i {
			return "\x00self\x00"
		}
		return classToken(j)
	})
}

// literalType is Literal[...] of the values Python's Literal accepts, joined
// with the plain types of the others.
func literalType(vals []*node) pyType {
	ts := make([]pyType, len(vals))
	for i, v := range vals {
		if lit, ok := literalValue(v); ok {
			ts[i] = pyType{{lit: lit}}
			continue
		}
		switch v.kind {
		case kindNumber:
			if isIntText(v.str) {
				ts[i] = simple("int")
			} else {
				ts[i] = simple("float")
			}
		case kindArray:
			ts[i] = simple("list[Any]")
		default:
			ts[i] = simple("dict[str, Any]")
		}
	}
	return union(ts...)
}

func literalValue(v *node) (string, bool) {
	switch v.kind {
	case kindNull, kindBool, kindString:
		return pyLiteral(v, 0), true
	case kindNumber:
		if isIntText(v.str) && len(v.str) <= maxIntDigits {
			return pyNumber(v.str), true
		}
	}
	return "", false
}

func (b *builder) renderClass(i int) string {
	c := b.classes[i]
	functional := false
	for _, f := range c.fields {
		if !isParamName(f.key) {
			functional = true
		}
	}
	var sb strings.Builder
	if functional {
		for _, line := range strings.Split(strings.TrimSpace(normalizeNewlines(c.doc)), "\n") {
			if line = comment(line); line != "" {
				sb.WriteString("# " + line + "\n")
			}
		}
		sb.WriteString(c.name + " = TypedDict(" + pyrepr.String(c.name) + ", {\n")
		for _, f := range c.fields {
			if doc := comment(f.doc); doc != "" {
				sb.WriteString("    # " + doc + "\n")
			}
			sb.WriteString("    " + pyrepr.String(f.key) + ": " + f.typ + ",\n")
		}
		sb.WriteString("})")
	} else {
		sb.WriteString("class " + c.name + "(TypedDict):")
		if doc := docstring(c.doc, "    "); doc != "" {
			sb.WriteString("\n" + doc)
		}
		for _, f := range c.fields {
			if doc := comment(f.doc); doc != "" {
				sb.WriteString("\n    # " + doc)
			}
			sb.WriteString("\n    " + f.key + ": " + f.typ)
		}
	}
	return b.resolveNames(sb.String())
}

// ---------------------------------------------------------------------------
// Functions

type param struct {
	key, typ, doc string
	required      bool
	def           *node
}

func (b *builder) function(t Tool, ident string) (string, error) {
	in, err := parseSchema(t.InputSchema)
	if err != nil {
		return "", fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	out, err := parseSchema(t.OutputSchema)
	if err != nil {
		return "", fmt.Errorf("tool %q: output schema: %w", t.Name, err)
	}
	prefix := pascal(ident)

	var required, optional, extra []param
	if props := in.get("properties"); props.isObject() {
		req := requiredSet(in)
		for i, key := range props.keys {
			p := props.vals[i]
			prm := param{
				key:      key,
				typ:      b.resolveNames(b.typeOf(p, in, prefix+pascal(key), nil).String()),
				doc:      p.get("description").text(),
				required: req[key],
				def:      p.get("default"),
			}
			switch {
			case !isParamName(key):
				extra = append(extra, prm)
			case prm.required:
				required = append(required, prm)
			default:
				optional = append(optional, prm)
			}
		}
	}
	named := slices.Concat(required, optional)

	returns := "Any"
	if out != nil && out.kind != kindNull {
		returns = b.resolveNames(b.typeOf(out, out, prefix+"Result", nil).String())
	}

	var sig []string
	if len(named) > 0 {
		sig = append(sig, "*")
	}
	var args []string
	for _, p := range named {
		s := p.key + ": " + p.typ
		if !p.required {
			s += " = " + defaultText(p.def)
		}
		sig = append(sig, s)
		if doc := collapse(p.doc); doc != "" {
			args = append(args, "    "+p.key+": "+doc)
		}
	}
	if len(extra) > 0 {
		kwargs := "kwargs"
		for slices.ContainsFunc(named, func(p param) bool { return p.key == kwargs }) {
			kwargs += "_"
		}
		sig = append(sig, "**"+kwargs+": Any")
		for _, p := range extra {
			detail := p.typ + ", optional"
			switch {
			case p.required:
				detail = p.typ + ", required"
			case p.def != nil:
				detail = p.typ + " = " + defaultText(p.def)
			}
			line := "    " + pyrepr.String(p.key) + " (" + detail + ", via **" + kwargs + ")"
			if doc := collapse(p.doc); doc != "" {
				line += ": " + doc
			}
			args = append(args, line)
		}
	}

	doc := strings.TrimSpace(t.Description)
	if len(args) > 0 {
		if doc != "" {
			doc += "\n\n"
		}
		doc += "Args:\n" + strings.Join(args, "\n")
	}
	var sb strings.Builder
	sb.WriteString("async def " + ident + "(" + strings.Join(sig, ", ") + ") -> " + returns + ":\n")
	if ds := docstring(doc, "    "); ds != "" {
		sb.WriteString(ds + "\n")
	}
	sb.WriteString("    ...")
	return sb.String(), nil
}

func defaultText(def *node) string {
	if def == nil {
		return "..."
	}
	return pyLiteral(def, 0)
}
