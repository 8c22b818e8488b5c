package textmatch

import (
	"math"
	"strings"
	"testing"
)

func TestCloseMatches(t *testing.T) {
	names := []string{"fs.read", "fs.write", "fs.edit", "bash", "bash.output", "tape.info"}
	tests := []struct {
		word string
		want []string
	}{
		{"fs_reed", []string{"fs.read"}},
		{"fs.wrte", []string{"fs.write"}},
		{"bash.out", []string{"bash.output"}},
		{"nothing-like", nil},
	}
	for _, tt := range tests {
		got := CloseMatches(tt.word, names, 3, 0.6)
		if len(got) > 0 && len(tt.want) > 0 && got[0] != tt.want[0] || (len(got) == 0) != (len(tt.want) == 0) {
			t.Errorf("CloseMatches(%q) = %v; want first %v", tt.word, got, tt.want)
		}
	}
	if r := seqRatio("abcd", "bcde"); r != 0.75 {
		t.Errorf("seqRatio(abcd, bcde) = %v; want 0.75 (difflib)", r)
	}
}

func TestWRatio(t *testing.T) {
	// Expected values are rapidfuzz 3.x fuzz.* outputs (default, no
	// processor), several from its README.
	tests := []struct {
		scorer string
		a, b   string
		want   float64
	}{
		{"ratio", "this is a test", "this is a test!", 96.55172413793103},
		{"partial_ratio", "this is a test", "this is a test!", 100},
		{"token_sort_ratio", "fuzzy wuzzy was a bear", "wuzzy fuzzy was a bear", 100},
		{"token_set_ratio", "fuzzy was a bear", "fuzzy fuzzy was a bear", 100},
		{"WRatio", "this is a test", "this is a new test!!!", 85.5},
		{"WRatio", "this is a word", "THIS IS A WORD", 21.428571428571427},
		{"WRatio", "fuzzy wuzzy was a bear", "wuzzy fuzzy was a bear", 95},
		{"WRatio", "databse", "database", 93.33333333333333},
		{"WRatio", "deploy", "deployment", 90},
		{"WRatio", "abc", "xyz", 0},
		{"WRatio", "", "x", 0},
	}
	scorers := map[string]func(a, b []rune) float64{
		"ratio":            ratio,
		"partial_ratio":    partialRatio,
		"token_sort_ratio": tokenSortRatio,
		"token_set_ratio":  tokenSetRatio,
		"WRatio":           wRatio,
	}
	for _, tc := range tests {
		got := scorers[tc.scorer]([]rune(tc.a), []rune(tc.b))
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s(%q, %q) = %v; want %v", tc.scorer, tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFuzzyCandidates(t *testing.T) {
	// 200 filler words push "needle" past the 128-candidate cap.
	far := strings.Repeat("filler ", 200) + "neeedle"
	near := "neeedle " + strings.Repeat("filler ", 200)
	m := NewFuzzy("needle")
	if m.Match(far) {
		t.Errorf("match found a word beyond the candidate cap")
	}
	if !m.Match(near) {
		t.Errorf("match missed a near word among the first candidates")
	}
	if NewFuzzy("ab") != nil || NewFuzzy("!!!") != nil {
		t.Errorf("short or wordless queries must not match fuzzily")
	}
}
