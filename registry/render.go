package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Content is one part of a rich result (text, image, audio, embedded
// resource). Tools return Contents when text alone cannot carry the result;
// the MCP server sends the parts as they are, models read the rendering.
type Content struct {
	// Type is "text", "image", "audio" or "resource".
	Type     string
	Text     string
	Data     []byte // image or audio bytes, or a binary resource's blob
	MIMEType string
	URI      string // resource URI
}

// Contents is a multi-part result.
type Contents []Content

// Render turns a result into the text a model reads: the tool's renderer if
// it has one; strings as they are; everything else as JSON (UTF-8, no HTML
// escaping), as Bub's Tool.render does. A value JSON cannot carry (a NaN,
// a channel, a function, a cycle) is rendered as its text form, Go's %v
// (Bub's str(result)), so a direct call still answers.
func Render(t *Tool, v any) (string, error) {
	if t != nil && t.Renderer != nil {
		return t.Renderer(v)
	}
	return defaultRender(v)
}

func defaultRender(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "null", nil
	case json.RawMessage:
		return string(x), nil
	case Contents:
		return renderContents(x), nil
	}
	b, err := marshalNoEscape(v)
	if err != nil {
		return str(v), nil
	}
	return string(b), nil
}

// str is v's text form for a value JSON cannot carry: Go's %v, as Bub
// falls back to str(result). A value that refers to itself (a map holding
// itself) would make %v recurse until the stack overflows, which no
// recover catches; it is named instead.
func str(v any) string {
	if cyclic(reflect.ValueOf(v), map[visit]bool{}) {
		return fmt.Sprintf("<%T value with a reference cycle>", v)
	}
	return fmt.Sprintf("%v", v)
}

// visit is a container on the path being walked: its address and type.
type visit struct {
	ptr uintptr
	typ reflect.Type
}

// cyclic reports whether v reaches itself through maps, slices, pointers
// or interfaces. onPath holds the containers between the root and v.
func cyclic(v reflect.Value, onPath map[visit]bool) bool {
	switch v.Kind() {
	case reflect.Interface:
		return !v.IsNil() && cyclic(v.Elem(), onPath)
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return false
		}
		k := visit{v.Pointer(), v.Type()}
		if onPath[k] {
			return true
		}
		onPath[k] = true
		defer delete(onPath, k)
		switch v.Kind() {
		case reflect.Pointer:
			return cyclic(v.Elem(), onPath)
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				if cyclic(it.Key(), onPath) || cyclic(it.Value(), onPath) {
					return true
				}
			}
			return false
		}
		for i := range v.Len() {
			if cyclic(v.Index(i), onPath) {
				return true
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			if cyclic(v.Index(i), onPath) {
				return true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if cyclic(v.Field(i), onPath) {
				return true
			}
		}
	}
	return false
}

func renderContents(cs Contents) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
		case "resource":
			if c.Text != "" {
				fmt.Fprintf(&b, "[resource %s]\n%s", c.URI, c.Text)
			} else {
				fmt.Fprintf(&b, "[resource %s: %s, %d bytes]", c.URI, c.MIMEType, len(c.Data))
			}
		default:
			fmt.Fprintf(&b, "[%s: %s, %d bytes]", c.Type, c.MIMEType, len(c.Data))
		}
	}
	return b.String()
}

// Base64 is a helper for transports that need a content part's data encoded.
func (c Content) Base64() string { return base64.StdEncoding.EncodeToString(c.Data) }
