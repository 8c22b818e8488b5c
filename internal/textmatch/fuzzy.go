// Package textmatch scores how alike two texts are, for the two places
// Bub does so: "did you mean" suggestions for unknown tool names
// (difflib's get_close_matches) and fuzzy tape search (rapidfuzz's
// WRatio, as Bub's file tape store uses it).
package textmatch

import (
	"slices"
	"strings"
)

// Fuzzy search follows Bub's FileTapeStore._is_fuzzy_match, which scores
// with rapidfuzz's WRatio. Both the query and the entry text are cut into
// words ([a-z0-9_/-]+ on lower-cased text); the query words, joined by
// spaces, are compared with the text's first words and with windows of as
// many consecutive words as the query has (128 candidates at most), and
// one candidate scoring >= 80 is a match. Queries shorter than three
// characters never match fuzzily.
//
// wRatio below re-implements WRatio on runes from rapidfuzz's published
// algorithm (without its score-cutoff shortcuts, which only speed things
// up):
//
//   - ratio is the normalised InDel similarity, 100·2·LCS/(len a + len b),
//     the "Levenshtein ratio" with substitutions costing two edits;
//   - if the longer string is under 1.5× the shorter: max(ratio,
//     0.95·token ratio), the token ratio being the best of the sorted-token
//     and token-set ratios;
//   - otherwise, with scale 0.9 (0.6 from 8× on): max(ratio, scale·partial
//     ratio, 0.95·scale·partial token ratio), where the partial ratio is
//     the best ratio of the shorter string against every equally long
//     window of the longer one (and the shorter prefixes/suffixes at its
//     edges).
const (
	fuzzyMinQuery      = 3
	fuzzyMinScore      = 80.0
	fuzzyMaxCandidates = 128
)

// Fuzzy matches entry texts against one query, as tape.search does. It
// caches the scores of candidate phrases, so it is not safe for
// concurrent use; make one per search.
type Fuzzy struct {
	phrase []rune
	window int
	cache  map[string]bool // candidate -> scored >= fuzzyMinScore
}

// NewFuzzy returns nil (which matches nothing) for queries too short
// or without words.
func NewFuzzy(needle string) *Fuzzy {
	if len([]rune(needle)) < fuzzyMinQuery {
		return nil
	}
	words := wordTokens(needle, -1)
	if len(words) == 0 {
		return nil
	}
	return &Fuzzy{
		phrase: []rune(strings.Join(words, " ")),
		window: len(words),
		cache:  map[string]bool{},
	}
}

// Match reports whether text matches the query fuzzily. A nil Fuzzy
// matches nothing.
func (m *Fuzzy) Match(text string) bool {
	if m == nil {
		return false
	}
	// Only the first words can become candidates; see the loop below.
	words := wordTokens(text, fuzzyMaxCandidates+m.window)
	if len(words) == 0 {
		return false
	}
	cands := words[:min(len(words), fuzzyMaxCandidates)]
	if m.window > 1 {
		// Like Bub: windows are added after the single words, the cap being
		// checked after each append, so at least one window gets in.
		for i := 0; i+m.window <= len(words); i++ {
			cands = append(cands, strings.Join(words[i:i+m.window], " "))
			if len(cands) >= fuzzyMaxCandidates {
				break
			}
		}
	}
	for _, c := range cands {
		ok, cached := m.cache[c]
		if !cached {
			ok = wRatio(m.phrase, []rune(c)) >= fuzzyMinScore
			m.cache[c] = ok
		}
		if ok {
			return true
		}
	}
	return false
}

// wordTokens returns the [a-z0-9_/-]+ runs of s, at most max of them
// (max < 0: all).
func wordTokens(s string, max int) []string {
	var out []string
	start := -1
	for i := 0; i <= len(s); i++ {
		word := i < len(s) && isWordByte(s[i])
		if word && start < 0 {
			start = i
		}
		if !word && start >= 0 {
			out = append(out, s[start:i])
			start = -1
			if max >= 0 && len(out) >= max {
				break
			}
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '/' || c == '-'
}

// lcs is the length of the longest common subsequence of a and b.
func lcs(a, b []rune) int {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if len(a) < len(b) {
		a, b = b, a
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for _, ca := range a {
		for j, cb := range b {
			switch {
			case ca == cb:
				cur[j+1] = prev[j] + 1
			case prev[j+1] >= cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ratio is rapidfuzz's fuzz.ratio: normalised InDel similarity in [0,100].
func ratio(a, b []rune) float64 {
	total := len(a) + len(b)
	if total == 0 {
		return 100
	}
	return 100 * float64(2*lcs(a, b)) / float64(total)
}

func normDistance(dist, lensum int) float64 {
	if lensum == 0 {
		return 100
	}
	return 100 - 100*float64(dist)/float64(lensum)
}

// partialRatio is the best ratio of the shorter string against the
// substrings of the longer one it could align with.
func partialRatio(a, b []rune) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	best := partialShortNeedle(a, b)
	if len(a) == len(b) && best < 100 {
		best = max(best, partialShortNeedle(b, a))
	}
	return best
}

// partialShortNeedle follows rapidfuzz's short-needle search: windows of
// the needle's length, plus the shorter prefixes and suffixes at the edges
// of the haystack, skipping windows whose edge rune the needle lacks.
func partialShortNeedle(needle, hay []rune) float64 {
	set := map[rune]bool{}
	for _, r := range needle {
		set[r] = true
	}
	n1, n2 := len(needle), len(hay)
	best := 0.0
	try := func(sub []rune) bool {
		if r := ratio(needle, sub); r > best {
			best = r
		}
		return best == 100
	}
	for i := 1; i < n1; i++ {
		if set[hay[i-1]] && try(hay[:i]) {
			return best
		}
	}
	for i := 0; i < n2-n1; i++ {
		if set[hay[i+n1-1]] && try(hay[i:i+n1]) {
			return best
		}
	}
	for i := max(n2-n1, 0); i < n2; i++ {
		if set[hay[i]] && try(hay[i:]) {
			return best
		}
	}
	return best
}

func splitSorted(s []rune) []string {
	f := strings.Fields(string(s))
	slices.Sort(f)
	return f
}

func tokenSortRatio(a, b []rune) float64 {
	return ratio([]rune(strings.Join(splitSorted(a), " ")), []rune(strings.Join(splitSorted(b), " ")))
}

// wordSet returns the sorted, de-duplicated words of s.
func wordSet(s []rune) []string {
	return slices.Compact(splitSorted(s))
}

func tokenSetRatio(a, b []rune) float64 {
	ta, tb := wordSet(a), wordSet(b)
	if len(ta) == 0 || len(tb) == 0 {
		return 0
	}
	var inter, diffAB, diffBA []string
	for _, w := range ta {
		if _, ok := slices.BinarySearch(tb, w); ok {
			inter = append(inter, w)
		} else {
			diffAB = append(diffAB, w)
		}
	}
	for _, w := range tb {
		if _, ok := slices.BinarySearch(ta, w); !ok {
			diffBA = append(diffBA, w)
		}
	}
	if len(inter) > 0 && (len(diffAB) == 0 || len(diffBA) == 0) {
		return 100
	}
	ab := []rune(strings.Join(diffAB, " "))
	ba := []rune(strings.Join(diffBA, " "))
	sect := len([]rune(strings.Join(inter, " ")))
	sep := 0
	if sect > 0 {
		sep = 1
	}
	sectAB := sect + sep + len(ab)
	sectBA := sect + sep + len(ba)
	dist := len(ab) + len(ba) - 2*lcs(ab, ba)
	result := normDistance(dist, sectAB+sectBA)
	if sect == 0 {
		return result
	}
	return max(result,
		normDistance(sep+len(ab), sect+sectAB),
		normDistance(sep+len(ba), sect+sectBA))
}

func partialTokenRatio(a, b []rune) float64 {
	wa, wb := strings.Fields(string(a)), strings.Fields(string(b))
	if len(wa) == 0 || len(wb) == 0 {
		return 0
	}
	sa, sb := wordSet(a), wordSet(b)
	for _, w := range sa {
		if _, ok := slices.BinarySearch(sb, w); ok {
			return 100 // a common word
		}
	}
	// No common word: the differences are the whole word sets.
	diffAB, diffBA := sa, sb
	slices.Sort(wa)
	slices.Sort(wb)
	res := partialRatio([]rune(strings.Join(wa, " ")), []rune(strings.Join(wb, " ")))
	if len(wa) == len(diffAB) && len(wb) == len(diffBA) {
		return res
	}
	return max(res, partialRatio([]rune(strings.Join(diffAB, " ")), []rune(strings.Join(diffBA, " "))))
}

// wRatio approximates rapidfuzz.fuzz.WRatio; see the comment at the top of
// this file.
func wRatio(a, b []rune) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	l1, l2 := len(a), len(b)
	lenRatio := float64(max(l1, l2)) / float64(min(l1, l2))
	end := ratio(a, b)
	if lenRatio < 1.5 {
		return max(end, max(tokenSortRatio(a, b), tokenSetRatio(a, b))*0.95)
	}
	scale := 0.9
	if lenRatio >= 8 {
		scale = 0.6
	}
	end = max(end, partialRatio(a, b)*scale)
	return max(end, partialTokenRatio(a, b)*0.95*scale)
}
