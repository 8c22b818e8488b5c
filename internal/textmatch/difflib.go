package textmatch

import "sort"

// CloseMatches returns up to n candidates whose similarity to word is at
// least cutoff, best first: Python's difflib.get_close_matches, which Bub
// uses for "did you mean" suggestions.
func CloseMatches(word string, candidates []string, n int, cutoff float64) []string {
	type scored struct {
		s     string
		score float64
	}
	var out []scored
	for _, c := range candidates {
		if s := seqRatio(word, c); s >= cutoff {
			out = append(out, scored{c, s})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].score != out[j].score {
			return out[i].score > out[j].score
		}
		return out[i].s > out[j].s
	})
	if len(out) > n {
		out = out[:n]
	}
	names := make([]string, len(out))
	for i, s := range out {
		names[i] = s.s
	}
	return names
}

// ratio is difflib.SequenceMatcher(None, a, b).seqRatio(): 2*M/T where M is the
// number of characters in the Ratcliff/Obershelp matching blocks.
func seqRatio(a, b string) float64 {
	ar, br := []rune(a), []rune(b)
	if len(ar)+len(br) == 0 {
		return 1
	}
	return 2 * float64(matching(ar, br)) / float64(len(ar)+len(br))
}

func matching(a, b []rune) int {
	i, j, k := longestMatch(a, b)
	if k == 0 {
		return 0
	}
	return k + matching(a[:i], b[:j]) + matching(a[i+k:], b[j+k:])
}

// longestMatch finds the longest common substring, earliest in a, then in b.
func longestMatch(a, b []rune) (besti, bestj, bestk int) {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
				if cur[j] > bestk {
					bestk, besti, bestj = cur[j], i-cur[j], j-cur[j]
				}
			} else {
				cur[j] = 0
			}
		}
		prev, cur = cur, prev
	}
	return
}
