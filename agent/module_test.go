package agent_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/fakemodel"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// newApp builds an App from src with only the agent module.
func newApp(t *testing.T, src string, env map[string]string, modules []string) (*app.App, error) {
	t.Helper()
	cfg, err := config.Parse("test.toml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Modules: modules, Home: t.TempDir(), Workspace: t.TempDir(),
		Getenv: func(k string) string { return env[k] }, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Cleanup(func() { a.Close() })
	}
	return a, err
}

func TestModuleConfig(t *testing.T) {
	src := "[agent]\nmodel = \"ollama:qwen3\"\napi_key_env = \"MY_KEY\"\nmax_steps = 7\ntimeout_seconds = 9\n"
	a, err := newApp(t, src, map[string]string{"MY_KEY": "k", "BUB_MAX_TOKENS": "100"}, []string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := agent.FromApp(a)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Settings{Model: "ollama:qwen3", APIKey: "k", MaxSteps: 7, MaxTokens: 100, Timeout: 9 * time.Second, CommandPrefix: ","}
	if diff := cmp.Diff(want, m.Agent().Settings(), cmpopts.IgnoreFields(agent.Settings{}, "Getenv")); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	for _, name := range []string{agent.AgentRunName, agent.SubagentName} {
		if _, err := a.Registry().Lookup(name); err != nil {
			t.Errorf("the module did not contribute %s: %v", name, err)
		}
	}
}

func TestModuleConfigErrors(t *testing.T) {
	tests := []struct {
		src  string
		env  map[string]string
		want string
	}{
		{src: "[agent]\nmax_steps = -1\n", want: "config: test.toml:2: agent.max_steps: must be >= 0"},
		{src: "[agent]\n\nmax_tokens = -5\n", want: "config: test.toml:3: agent.max_tokens: must be >= 0"},
		{src: "[agent]\ntimeout_seconds = -1\n", want: "config: test.toml:2: agent.timeout_seconds: must be >= 0"},
		{src: "[agent]\nmodle = \"openai:x\"\n", want: "config: test.toml:2: agent.modle: unknown key"},
		{src: "[agent]\nmodel = \"gpt-4o\"\n", want: "agent: BUB_MODEL / [agent] model: "},
		{src: "", env: map[string]string{"BUB_MAX_STEPS": "0"}, want: `agent: BUB_MAX_STEPS="0": want a whole number > 0`},
	}
	for _, tt := range tests {
		_, err := newApp(t, tt.src, tt.env, []string{"agent"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("app.New(%q) = %v; want an error containing %q", tt.src, err, tt.want)
		}
	}
}

func TestFromAppWithoutModule(t *testing.T) {
	a, err := newApp(t, "", nil, []string{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.FromApp(a); err == nil || !strings.Contains(err.Error(), `the "agent" module is not loaded`) {
		t.Errorf("FromApp = %v; want the module named as missing", err)
	}
}

// TestSubagentForgetsTempSession checks that a subagent's temporary
// session is released when its turn ends, and that its parent's is not.
func TestSubagentForgetsTempSession(t *testing.T) {
	srv := fakemodel.NewOpenAI(t, fakemodel.Replies(t,
		fakemodel.Reply{Calls: []call{{ID: "s1", Name: "subagent", Arguments: `{"prompt":"who are you","allowed_tools":["whoami"]}`}}},
		fakemodel.Reply{Calls: []call{{ID: "w1", Name: "whoami", Arguments: `{}`}}},
		fakemodel.Reply{Text: "sub done"},
		fakemodel.Reply{Text: "parent done"},
	))
	f := newFixture(t, fixtureOpts{url: srv.URL, whoami: true})
	parent, err := f.app.Session(f.conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.agent.Run(t.Context(), &agent.Turn{Conn: f.conn, Prompt: "delegate"}); err != nil {
		t.Fatal(err)
	}
	if len(f.sessions) != 1 {
		t.Fatalf("whoami ran %d times; want once", len(f.sessions))
	}
	key := fakemodel.OpenAIMessages(srv.Requests()[2])[3].Content
	if !strings.HasPrefix(key, "temp/") {
		t.Fatalf("the subagent ran in session %q; want a temporary one", key)
	}
	conn := &providers.Connection{Transport: "agent", Profile: f.conn.Profile, SessionKey: key, Workspace: f.conn.Workspace}
	again, err := f.app.Session(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer f.app.Forget(conn)
	if again == f.sessions[0] || len(again.Tape().Entries()) != 0 {
		t.Errorf("session %s outlived the subagent's turn", key)
	}
	if now, _ := f.app.Session(f.conn); now != parent {
		t.Error("the parent's session was released too")
	}
}

// TestToolsWithoutModel runs the agent's tools as comma commands, which
// reach every registered tool, when no model is configured.
func TestToolsWithoutModel(t *testing.T) {
	f := newFixture(t, fixtureOpts{url: "http://127.0.0.1:1"})
	a := f.mod.Configure(&agent.Options{})
	for line, want := range map[string]string{
		"subagent prompt=hi":  "[config] subagent needs the built-in agent and a configured model (BUB_MODEL or [agent] model).",
		"agent_run prompt=hi": "[config] agent_run needs a configured model (BUB_MODEL or [agent] model) and a profile with agent = true.",
	} {
		if out, err := a.Command(t.Context(), f.conn, line); err == nil || err.Error() != want {
			t.Errorf("Command(%q) = %q, %v; want error %q", line, out, err, want)
		}
	}
}
