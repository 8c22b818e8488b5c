package agent_test

import (
	"testing"

	"github.com/bubbuild/bub-mcp/agent"
	_ "github.com/bubbuild/bub-mcp/codemode"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// TestTurnStateCodeMode: an SDK caller's Turn.State {"code_mode": true}
// gives that turn the code-mode View (the model sees the preserved tools
// plus run_code, and its run_code works); the next turn without it is
// direct again.
func TestTurnStateCodeMode(t *testing.T) {
	testenv.MustHaveExec(t, "python3", "apt-get install python3")
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{ID: "c1", Name: "run_code", Arguments: `{"code":"i = await tools.tape_info()\nprint('entries' in i)"}`}}},
		fakemodel.Reply{Text: "done"},
		fakemodel.Reply{Text: "direct again"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL, modules: []string{"codemode"}})
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "count", State: map[string]any{"code_mode": true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "again"}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests; want 3", len(reqs))
	}
	if diff := cmp.Diff([]string{"bash", "fs_read", "fs_write", "run_code"}, fakemodel.ToolNames(reqs[0])); diff != "" {
		t.Errorf("code-mode turn tools (-want +got):\n%s", diff)
	}
	msgs := fakemodel.OpenAIMessages(reqs[1])
	if got := msgs[len(msgs)-2].Content; got != "True\n" {
		t.Errorf("run_code result = %q; want True\\n", got)
	}
	if names := fakemodel.ToolNames(reqs[2]); contains(names, "run_code") || !contains(names, "tape_info") {
		t.Errorf("next turn tools = %v; want direct tools (nothing stored)", names)
	}
}
