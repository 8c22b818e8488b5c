package toolsearch

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func unweighted(words ...string) []term {
	out := make([]term, len(words))
	for i, w := range words {
		out[i] = term{w, 1}
	}
	return out
}

// TestBM25Scores checks the scores against values worked out by hand
// with k1 = 1.2, b = 0.75 and idf = ln(1 + (N - df + 0.5)/(df + 0.5)).
func TestBM25Scores(t *testing.T) {
	// Three documents of lengths 2, 2, 3: avgdl = 7/3. A term found once
	// in a document of length 2 has the tf part
	// 2.2 / (1 + 1.2·(0.25 + 0.75·2/(7/3))) = 2.2/2.0714286 = 1.0620690.
	small := [][]term{unweighted("read", "file"), unweighted("write", "file"), unweighted("list", "directory", "entry")}
	// Weighted: "read" and "file" of weight 3 (dl 6), "file" of weight 1
	// (dl 1); avgdl = 3.5.
	weighted := [][]term{{{"read", 3}, {"file", 3}}, {{"file", 1}}}
	tests := []struct {
		name  string
		docs  [][]term
		query []string
		want  []float64
	}{
		// idf(read) = ln(1 + 2.5/1.5) = ln(8/3) = 0.9808293; × 1.0620690.
		{"rare term", small, []string{"read"}, []float64{1.0417083100952130, 0, 0}},
		// idf(file) = ln(1 + 1.5/2.5) = ln 1.6 = 0.4700036; × 1.0620690.
		{"common term", small, []string{"file"}, []float64{0.4991762683023676, 0.4991762683023676, 0}},
		{"two terms add up", small, []string{"read", "file"}, []float64{1.5408845783975806, 0.4991762683023676, 0}},
		{"a repeated query term counts once", small, []string{"read", "read"}, []float64{1.0417083100952130, 0, 0}},
		{"unknown term", small, []string{"delete"}, []float64{0, 0, 0}},
		// idf(read) = ln 2; tf part 3·2.2/(3 + 1.2·(0.25 + 0.75·6/3.5))
		// = 6.6/4.8428571 = 1.3628319.
		{"weight repeats a term", weighted, []string{"read"}, []float64{0.9446430602321377, 0}},
		// idf(file) = ln 1.2 = 0.1823216; doc 0: 6.6/(3 + 1.2·1.5357143)
		// = 1.3628319, doc 1: 2.2/(1 + 1.2·(0.25 + 0.75/3.5)) = 1.4128440:
		// the short document wins on length.
		{"length normalisation", weighted, []string{"file"}, []float64{0.24847362607317705, 0.25759192427769734}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := newBM25(tt.docs).scores(tt.query)
			if d := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-12)); d != "" {
				t.Errorf("scores (-want +got):\n%s", d)
			}
		})
	}
}

func TestBM25Empty(t *testing.T) {
	if got := newBM25(nil).scores([]string{"read"}); len(got) != 0 {
		t.Errorf("scores of an empty index = %v", got)
	}
	for _, s := range newBM25([][]term{nil}).scores([]string{"read"}) {
		if s != 0 || math.IsNaN(s) {
			t.Errorf("an empty document scored %v", s)
		}
	}
}

func TestTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"files.read_text_file", []string{"file", "read", "text", "file"}},
		{"everything.get-sum", []string{"everything", "get", "sum"}},
		{"readFile", []string{"read", "file"}},
		{"HTTPServer2Go", []string{"http", "server2", "go"}},
		{"list_directory_with_sizes", []string{"list", "directory", "size"}},
		{"Create entities in the knowledge graph!", []string{"create", "entity", "knowledge", "graph"}},
		{"add two numbers", []string{"add", "two", "number"}},
		{"process matches addresses status", []string{"process", "match", "address", "status"}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := tokens(tt.in); !cmp.Equal(tt.want, got) {
			t.Errorf("tokens(%q) (-want +got):\n%s", tt.in, cmp.Diff(tt.want, got))
		}
	}
}
