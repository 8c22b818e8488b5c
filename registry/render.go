package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
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
// escaping), as Bub's Tool.render does.
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
		return "", fmt.Errorf("registry: render %T: %w", v, err)
	}
	return string(b), nil
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
