package upstream

import (
	"context"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
)

// Requests and logs from an upstream go to the call in flight only when
// it is unambiguous whose they are.
func TestSoleCaller(t *testing.T) {
	a := &registry.Connection{Transport: "http", SessionKey: "s1", ClientName: "a"}
	b := &registry.Connection{Transport: "http", SessionKey: "s2", ClientName: "b"}
	shared, other := &session{}, &session{}
	call := func(seq int64, run string, conn *registry.Connection) *inflight {
		return &inflight{ctx: context.Background(), seq: seq, sess: shared, tc: &registry.ToolContext{RunID: run, Conn: conn}}
	}
	// Another principal's connection (auth = "oauth"): its calls are
	// never the one a request on the shared connection is for.
	onOther := func(f *inflight) *inflight { f.sess = other; return f }
	tests := []struct {
		name  string
		calls []*inflight
		want  int64 // seq; 0 = nobody
	}{
		{"none", nil, 0},
		{"one", []*inflight{call(1, "r1", a)}, 1},
		{"one run gathering two calls: the latest", []*inflight{call(1, "r1", a), call(2, "r1", a)}, 2},
		{"two runs of one client", []*inflight{call(1, "r1", a), call(2, "r2", a)}, 0},
		{"two clients", []*inflight{call(1, "r1", a), call(2, "r1", b)}, 0},
		{"a call without a run", []*inflight{call(1, "", a), call(2, "", a)}, 0},
		{"the only call is on another connection", []*inflight{onOther(call(1, "r1", b))}, 0},
		{"another connection's call does not make it ambiguous", []*inflight{call(1, "r1", a), onOther(call(2, "r2", b))}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &upstream{}
			for _, f := range tt.calls {
				u.calls.Store(f.seq, f)
			}
			got := u.soleCaller(shared)
			if (got == nil) != (tt.want == 0) || (got != nil && got.seq != tt.want) {
				t.Errorf("soleCaller() = %+v; want seq %d", got, tt.want)
			}
		})
	}
}
