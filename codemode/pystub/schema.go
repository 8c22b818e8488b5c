package pystub

// Schema walking: JSON decoded in key order, and $ref resolution.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// maxParseDepth bounds the nesting of a schema document.
const maxParseDepth = 256

type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is a decoded JSON value that keeps the key order of objects, which
// encoding/json's maps would lose.
type node struct {
	kind  nodeKind
	str   string // a string, or the literal text of a number
	b     bool
	items []*node // array elements
	keys  []string
	vals  []*node        // parallel to keys
	index map[string]int // key → position, for larger objects
}

// get returns the value of key in an object, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	if n.index != nil {
		if i, ok := n.index[key]; ok {
			return n.vals[i]
		}
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// set adds key; a repeated key keeps its first position and its last value,
// as Python's json module does.
func (n *node) set(key string, val *node) {
	if n.index != nil {
		if i, ok := n.index[key]; ok {
			n.vals[i] = val
			return
		}
	} else {
		for i, k := range n.keys {
			if k == key {
				n.vals[i] = val
				return
			}
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, val)
	if n.index == nil && len(n.keys) > 16 {
		n.index = make(map[string]int, 2*len(n.keys))
		for i, k := range n.keys {
			n.index[k] = i
		}
	} else if n.index != nil {
		n.index[key] = len(n.keys) - 1
	}
}

func (n *node) isObject() bool { return n != nil && n.kind == kindObject }
func (n *node) isArray() bool  { return n != nil && n.kind == kindArray }

// text returns a string value, or "".
func (n *node) text() string {
	if n == nil || n.kind != kindString {
		return ""
	}
	return n.str
}

// parseSchema decodes raw, keeping key order. Empty input yields nil.
func parseSchema(raw json.RawMessage) (*node, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("unexpected %v after the schema", tok)
		}
		return nil, err
	}
	return n, nil
}

func parseValue(dec *json.Decoder, depth int) (*node, error) {
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: v}, nil
	case json.Number:
		return &node{kind: kindNumber, str: string(v)}, nil
	case string:
		return &node{kind: kindString, str: v}, nil
	case json.Delim:
		if depth >= maxParseDepth {
			return nil, errors.New("schema is nested too deeply")
		}
		n := &node{kind: kindArray}
		if v == '{' {
			n.kind = kindObject
		}
		for dec.More() {
			var key string
			if n.kind == kindObject {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("unexpected %v in object", kt)
				}
				key = k
			}
			val, err := parseValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if n.kind == kindObject {
				n.set(key, val)
			} else {
				n.items = append(n.items, val)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// refState tracks one $ref target: while it is being converted, a class it
// produced (slot) is referenced by name; afterwards result is reused.
type refState struct {
	done   bool
	slot   int
	result pyType
}

// ref resolves a local reference ("#", "#/$defs/Name", any JSON pointer).
// A reference back into a schema still being converted names its TypedDict
// as a forward reference, or is Any when no TypedDict is involved.
func (b *builder) ref(ref string, root *node) pyType {
	target, name, ok := pointer(root, ref)
	if !ok {
		return anyType
	}
	if st := b.refs[target]; st != nil {
		switch {
		case st.done:
			return st.result
		case st.slot >= 0:
			return simple("'" + classToken(st.slot) + "'")
		}
		return anyType
	}
	st := &refState{slot: -1}
	b.refs[target] = st
	hint := pascal(name)
	if hint == "" {
		hint = "Ref"
	}
	st.result = b.typeOf(target, root, hint, st)
	st.done = true
	return st.result
}

// pointer finds the target of a local reference and the last path segment.
func pointer(root *node, ref string) (*node, string, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok || root == nil {
		return nil, "", false
	}
	if p, err := url.PathUnescape(frag); err == nil {
		frag = p
	}
	if frag == "" {
		return root, "", true
	}
	if frag[0] != '/' {
		return nil, "", false
	}
	n, name := root, ""
	for _, seg := range strings.Split(frag[1:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch n.kind {
		case kindObject:
			n = n.get(seg)
		case kindArray:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n.items) {
				return nil, "", false
			}
			n = n.items[i]
		default:
			n = nil
		}
		if n == nil {
			return nil, "", false
		}
		name = seg
	}
	return n, name, true
}

func requiredSet(s *node) map[string]bool {
	req := map[string]bool{}
	if r := s.get("required"); r.isArray() {
		for _, item := range r.items {
			if item.kind == kindString {
				req[item.str] = true
			}
		}
	}
	return req
}
