package toolsearch

import (
	"math"
	"strings"
	"unicode"
)

// BM25's two parameters, at the values Lucene and most of the literature
// use: k1 saturates a term's repetitions, b normalises by length.
const (
	k1 = 1.2
	b  = 0.75
)

// term is one token of a document with the weight of the field it came
// from: a field of weight w counts each of its tokens w times (BM25F with
// one length normalisation for all fields), so a word of a tool's name
// weighs more than the same word deep in its description.
type term struct {
	text   string
	weight float64
}

// bm25 is an Okapi BM25 index over a fixed list of documents.
type bm25 struct {
	tf    []map[string]float64 // per document: weighted term frequency
	dl    []float64            // per document: weighted length
	df    map[string]int       // documents containing each term
	avgdl float64
}

// newBM25 indexes docs; a document's position is its id in scores.
func newBM25(docs [][]term) *bm25 {
	ix := &bm25{tf: make([]map[string]float64, len(docs)), dl: make([]float64, len(docs)), df: map[string]int{}}
	total := 0.0
	for i, d := range docs {
		tf := map[string]float64{}
		for _, t := range d {
			tf[t.text] += t.weight
			ix.dl[i] += t.weight
		}
		for w := range tf {
			ix.df[w]++
		}
		ix.tf[i] = tf
		total += ix.dl[i]
	}
	if len(docs) > 0 {
		ix.avgdl = total / float64(len(docs))
	}
	return ix
}

// idf is Lucene's BM25 IDF, which stays positive for a term found in
// more than half the documents (the original goes negative there).
func (ix *bm25) idf(w string) float64 {
	n, df := float64(len(ix.tf)), float64(ix.df[w])
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// scores is every document's BM25 score for the query's terms (each
// distinct term counted once).
func (ix *bm25) scores(query []string) []float64 {
	out := make([]float64, len(ix.tf))
	seen := map[string]bool{}
	for _, w := range query {
		if seen[w] || ix.df[w] == 0 {
			continue
		}
		seen[w] = true
		idf := ix.idf(w)
		for i, tf := range ix.tf {
			f := tf[w]
			if f == 0 {
				continue
			}
			out[i] += idf * f * (k1 + 1) / (f + k1*(1-b+b*ix.dl[i]/ix.avgdl))
		}
	}
	return out
}

// stopwords carry no meaning of their own in a query or a description;
// left in, "read a file" would favour every tool whose description says
// "a".
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields("a an and are as at be by can do for from given how i in into is it its me my of on or that the this to use used using when which will with you your") {
		stopwords[w] = true
	}
}

// tokens splits text into lower-case, stemmed words: on anything that is
// not a letter or digit (so "." "_" "-" and spaces), and inside
// camelCase and ACRONYMWords ("readFile" → read, file; "HTTPServer" →
// http, server). Stop words are dropped.
func tokens(text string) []string {
	var out []string
	rs := []rune(text)
	start := -1
	flush := func(end int) {
		if start >= 0 {
			w := stem(strings.ToLower(string(rs[start:end])))
			if !stopwords[w] {
				out = append(out, w)
			}
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start >= 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush(i)
			}
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(rs))
	return out
}

// stem folds plurals onto their singular ("entities" → entity, "files"
// → file), which is most of what separates a query's words from a
// definition's: a light stemmer, since tool vocabularies are small and
// an aggressive one (Porter's) conflates "directory" and "direct".
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}
