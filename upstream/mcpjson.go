package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonShape is what a value of mcp.json must be, said in the file's
// terms ("a list of strings"), never in Go's: errors name what to write.
type jsonShape struct {
	want   string                // "a list of strings"
	kind   byte                  // '{', '[', '"' or 't' (true or false)
	elem   *jsonShape            // an object's members or a list's items; nil is anything
	fields map[string]*jsonShape // an object's known members; others are anything
}

// member is the shape of an object's member key, matched as
// encoding/json matches a field: exactly, else without case.
func (s *jsonShape) member(key string) *jsonShape {
	if s == nil {
		return nil
	}
	if s.elem != nil {
		return s.elem
	}
	if f, ok := s.fields[key]; ok {
		return f
	}
	for k, f := range s.fields {
		if strings.EqualFold(k, key) {
			return f
		}
	}
	return nil
}

var (
	jsonString  = &jsonShape{want: "a string", kind: '"'}
	jsonStrings = &jsonShape{want: `an object of strings, such as {"NAME": "value"}`, kind: '{', elem: jsonString}
	// mcpJSONServerShape is an entry of mcpServers: mcpJSONServer's
	// fields, the ones bub-mcp reads (others are named as ignored).
	mcpJSONServerShape = &jsonShape{want: `an object such as {"command": "...", "args": [...]} or {"url": "..."}`, kind: '{', fields: map[string]*jsonShape{
		"command": jsonString, "args": {want: "a list of strings", kind: '[', elem: jsonString}, "env": jsonStrings, "cwd": jsonString,
		"url": jsonString, "httpUrl": jsonString, "type": jsonString, "transportType": jsonString, "headers": jsonStrings,
		"disabled": {want: "true or false", kind: 't'},
	}}
	mcpJSONServersShape = &jsonShape{want: `an object of servers, such as {"<name>": {"command": "..."}}`, kind: '{', elem: mcpJSONServerShape}
	mcpJSONShape        = &jsonShape{want: `an object such as {"mcpServers": {...}}`, kind: '{', fields: map[string]*jsonShape{
		"mcpServers": mcpJSONServersShape, "servers": mcpJSONServersShape,
	}}
)

// jsonDoc is a JSON file checked against a shape, with where its values
// are, so that every error says file:line:column.
type jsonDoc struct {
	file string
	src  []byte
	at   map[string]int // byte offset of each value down to maxDepthAt, by key path joined with "\x00"
}

// maxDepthAt bounds the values whose place is kept (a server's fields):
// the file may hold a million list items.
const maxDepthAt = 3

// readJSONDoc reads at most maxMCPJSONBytes of r and checks its syntax
// and shape (null is allowed anywhere, as encoding/json reads it). The
// first value is the document; what follows it is not read, as before.
func readJSONDoc(file string, r io.Reader, shape *jsonShape) (*jsonDoc, error) {
	src, err := io.ReadAll(&limitReader{r: r, n: maxMCPJSONBytes})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	d := &jsonDoc{file: file, src: src, at: map[string]int{}}
	var raw json.RawMessage
	var syn *json.SyntaxError
	switch err := json.NewDecoder(bytes.NewReader(src)).Decode(&raw); {
	case err == io.EOF:
		return nil, d.fail(len(src), nil, "the file is empty; want "+shape.want)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, d.fail(len(src), nil, "unexpected end of file: an object, list or string is not closed")
	case errors.As(err, &syn):
		off := int(syn.Offset) - 1 // the offset is past the bad byte
		msg := syn.Error()
		if off >= 0 && off < len(src) {
			switch c := src[off]; {
			case c == '/':
				msg += " (JSON has no comments)"
			case (c == '}' || c == ']') && bytes.HasSuffix(bytes.TrimRight(src[:off], " \t\r\n"), []byte(",")):
				msg += " (JSON has no comma after the last item)"
			}
		}
		return nil, d.fail(off, nil, msg)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	if err := d.value(dec, nil, shape); err != nil {
		return nil, err
	}
	return d, nil
}

// value checks the next value of dec, at the key path, against shape.
func (d *jsonDoc) value(dec *json.Decoder, path []string, shape *jsonShape) error {
	off := int(dec.InputOffset())
	for off < len(d.src) && strings.IndexByte(" \t\r\n:,", d.src[off]) >= 0 {
		off++
	}
	if len(path) <= maxDepthAt {
		d.at[strings.Join(path, "\x00")] = off
	}
	tok, err := dec.Token()
	if err != nil { // the syntax was checked: only a short read
		return fmt.Errorf("%s: %w", d.file, err)
	}
	var kind byte
	var got string
	switch tok := tok.(type) {
	case nil:
		return nil
	case json.Delim:
		kind, got = byte(tok), map[json.Delim]string{'{': "an object", '[': "a list"}[tok]
	case string:
		kind, got = '"', "a string"
	case float64:
		got = "a number"
	case bool:
		kind, got = 't', strconv.FormatBool(tok)
	}
	if shape != nil && shape.kind != kind {
		return d.fail(off, path, fmt.Sprintf("want %s, not %s", shape.want, got))
	}
	if kind != '{' && kind != '[' {
		return nil
	}
	for i := 0; dec.More(); i++ {
		key, child := strconv.Itoa(i), (*jsonShape)(nil)
		if kind == '{' {
			k, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%s: %w", d.file, err)
			}
			key, _ = k.(string)
			child = shape.member(key)
		} else if shape != nil {
			child = shape.elem
		}
		if err := d.value(dec, append(slices.Clip(path), key), child); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing } or ]
		return fmt.Errorf("%s: %w", d.file, err)
	}
	return nil
}

// failAt is the error for a bad value at the key path, placed at the
// deepest part of it whose place is known (a missing key: its object).
func (d *jsonDoc) failAt(msg string, path ...string) error {
	for n := min(len(path), maxDepthAt); n >= 0; n-- {
		if off, ok := d.at[strings.Join(path[:n], "\x00")]; ok {
			return d.fail(off, path, msg)
		}
	}
	return d.fail(0, path, msg)
}

// fail is "<file>:<line>:<column>: <key path>: <msg>", the line and
// column (in characters, from 1) of the byte at off.
func (d *jsonDoc) fail(off int, path []string, msg string) error {
	before := d.src[:min(max(off, 0), len(d.src))]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	where := fmt.Sprintf("%s:%d:%d", d.file, line, col)
	if len(path) > 0 {
		where += ": " + strings.Join(path, ".")
	}
	return fmt.Errorf("%s: %s", where, msg)
}
