package builtin

import (
	"fmt"
	"slices"
	"strings"
)

// Bounds of the near-miss search, so a failed edit of a big file stays
// cheap and its message short.
const (
	// nearMissMaxOld is the longest old text (in lines) searched for.
	nearMissMaxOld = 200
	// nearMissBudget bounds the characters compared when no line of old
	// occurs in the file and every window has to be scored.
	nearMissBudget = 8 << 20
	// nearMissCandidates is how many windows are scored in full after
	// the line vote.
	nearMissCandidates = 32
	// nearMissCommon is how often a line may occur in the file and
	// still vote for where old almost is.
	nearMissCommon = 1000
	// nearMissMinScore is the similarity below which nothing is shown.
	nearMissMinScore = 0.5
	// diffMaxLines and diffMaxWidth bound the diff shown.
	diffMaxLines = 40
	diffMaxWidth = 200
)

// nearMiss explains where old almost occurs in text, from line start on:
// the closest run of lines (as many as old has), as a unified diff from
// old to the file, with a note when they differ only in whitespace. It
// says so when nothing is close. Lines are compared with whitespace
// collapsed, then windows are scored by character-bigram similarity.
func nearMiss(text string, start int, old, path string) string {
	oldLines := splitLines(strings.TrimSuffix(old, "\n"))
	if len(oldLines) > nearMissMaxOld {
		return fmt.Sprintf("(old has %d lines, too many to look for a near miss; check it against the file with fs.read)", len(oldLines))
	}
	all := splitLines(text)
	if start >= len(all) {
		return fmt.Sprintf("(the file has only %d lines, so there is nothing from line %d on)", len(all), start)
	}
	file := all[start:]
	k := min(len(oldLines), len(file))
	normOld := normLines(oldLines)
	normFile := normLines(file)

	// Vote: each line of old that occurs in the file (whitespace
	// collapsed) votes for the window that would align them.
	at := map[string][]int{}
	for i, l := range normFile {
		if l != "" {
			at[l] = append(at[l], i)
		}
	}
	votes := map[int]int{}
	for j, l := range normOld {
		if l == "" || len(at[l]) > nearMissCommon {
			continue // a "}" that is everywhere says nothing about where
		}
		for _, i := range at[l] {
			if w := i - j; w >= 0 && w+k <= len(file) {
				votes[w]++
			}
		}
	}
	var cands []int
	if len(votes) > 0 {
		for w := range votes {
			cands = append(cands, w)
		}
		slices.SortFunc(cands, func(a, b int) int {
			if votes[a] != votes[b] {
				return votes[b] - votes[a]
			}
			return a - b
		})
		cands = cands[:min(len(cands), nearMissCandidates)]
	} else if (len(file)-k+1)*len(old) <= nearMissBudget {
		for w := 0; w+k <= len(file); w++ {
			cands = append(cands, w)
		}
	} else {
		return "(no line of old occurs in the file, and the file is too large to search for a near miss; check old with fs.read)"
	}

	target := bigrams(strings.Join(normOld, "\n"))
	best, bestScore := -1, 0.0
	for _, w := range cands {
		sc := dice(target, bigrams(strings.Join(normFile[w:w+k], "\n")))
		if sc > bestScore || sc == bestScore && best >= 0 && w < best {
			best, bestScore = w, sc
		}
	}
	if best < 0 || bestScore < nearMissMinScore {
		return "(nothing in the file is close to old; check it with fs.read)"
	}
	window := file[best : best+k]
	first := start + best + 1 // 1-based
	var b strings.Builder
	if len(oldLines) == k && slices.Equal(normOld, normFile[best:best+k]) {
		fmt.Fprintf(&b, "old matches line%s %s of the file (1-based) except for whitespace (indentation, spaces or line endings); copy the exact text (fs.read offset=%d limit=%d):\n",
			plural(k, "", "s"), lineRange(first, k), first-1, k)
	} else {
		fmt.Fprintf(&b, "closest text: line%s %s of the file (1-based), %.0f%% similar; diff from old to the file:\n",
			plural(k, "", "s"), lineRange(first, k), bestScore*100)
	}
	b.WriteString(unifiedDiff(oldLines, window, path, first))
	return strings.TrimSuffix(b.String(), "\n")
}

func lineRange(first, n int) string {
	if n == 1 {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d-%d", first, first+n-1)
}

// splitLines splits s at "\n", "\r\n" and "\r", as fs.read does; "" is
// no lines.
func splitLines(s string) []string {
	var lines []string
	cr := strings.IndexByte(s, '\r') >= 0
	for i := 0; i < len(s); {
		end, next := lineEnd(s, i, cr)
		lines = append(lines, s[i:end])
		i = next
	}
	return lines
}

// normLines collapses each line's whitespace runs to one space and trims
// it, so that indentation and spacing do not count.
func normLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Join(strings.Fields(l), " ")
	}
	return out
}

// bigrams returns the sorted byte bigrams of s.
func bigrams(s string) []uint16 {
	if len(s) < 2 {
		if s == "" {
			return nil
		}
		return []uint16{uint16(s[0])}
	}
	out := make([]uint16, len(s)-1)
	for i := range out {
		out[i] = uint16(s[i])<<8 | uint16(s[i+1])
	}
	slices.Sort(out)
	return out
}

// dice is the Sørensen-Dice similarity of two sorted bigram multisets.
func dice(a, b []uint16) float64 {
	if len(a)+len(b) == 0 {
		return 1
	}
	common := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			common++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return 2 * float64(common) / float64(len(a)+len(b))
}

// unifiedDiff returns a line diff from a (old) to b (the file's lines
// from line first, 1-based) in unified format, one hunk, at most
// diffMaxLines lines of diffMaxWidth characters.
func unifiedDiff(a, b []string, path string, first int) string {
	ops := diffLines(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- old\n+++ %s\n@@ -1,%d +%d,%d @@\n", path, len(a), first, len(b))
	for i, op := range ops {
		if i == diffMaxLines {
			fmt.Fprintf(&out, "... (%d more diff lines)\n", len(ops)-i)
			break
		}
		out.WriteString(op[:1] + clip(op[1:], diffMaxWidth) + "\n")
	}
	return out.String()
}

// clip cuts s to n characters, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n { // bytes ≥ characters
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// diffLines is a longest-common-subsequence line diff: each result is
// " line", "-line" (only in a) or "+line" (only in b). Inputs are bounded
// by nearMissMaxOld lines, so the quadratic table stays small.
func diffLines(a, b []string) []string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []string
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, " "+a[i])
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, "-"+a[i])
			i++
		default:
			ops = append(ops, "+"+b[j])
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, "-"+a[i])
	}
	for ; j < m; j++ {
		ops = append(ops, "+"+b[j])
	}
	return ops
}
