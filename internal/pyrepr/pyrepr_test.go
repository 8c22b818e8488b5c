package pyrepr

import "testing"

func TestString(t *testing.T) {
	tests := map[string]string{
		"abc":        "'abc'",
		"it's":       `"it's"`,
		`a'b"c`:      `'a\'b"c'`,
		"a\nb\\":     `'a\nb\\'`,
		"\x00é日🎉":    `'\x00é日🎉'`,
		"\u200b":     `'\u200b'`,
		"\U000e0001": `'\U000e0001'`,
		"":           "''",
	}
	for in, want := range tests {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %s; want %s", in, got, want)
		}
	}
}
