package skills_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/skills"
	"github.com/google/go-cmp/cmp"

	// The planted-secret table configures a PostgreSQL store, a kind
	// only its package registers.
	_ "github.com/bubbuild/bub-mcp/sessions/pgstore"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModuleSkills: ${config.a.b} comes from [skills.vars], $name in a prompt
// inlines that skill, and a confined profile sees only the skills whose
// folders resolve inside its workspace.
func TestModuleSkills(t *testing.T) {
	home, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	project := filepath.Join(ws, skills.ProjectSkillsDir)
	write(t, filepath.Join(project, "alpha", skills.SkillFileName), "---\nname: alpha\ndescription: First.\n---\nteam ${config.team}, ${ config.limits.confine }, missing ${config.nope.x}, run $PYTHON $SKILL_DIR/go.py\n")
	write(t, filepath.Join(outside, "linked", skills.SkillFileName), "---\nname: linked\ndescription: Lives elsewhere.\n---\nsecret\n")
	if err := os.Symlink(filepath.Join(outside, "linked"), filepath.Join(project, "linked")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, skills.ProjectSkillsDir, "global", skills.SkillFileName), "---\nname: global\ndescription: From home.\n---\n")

	a, m := skillsApp(t, "[skills.vars]\nteam = \"infra\"\n[skills.vars.limits]\nconfine = true\n[profiles.c]\nconfine = true\n", ws)
	conn := func(profile string) *providers.Connection {
		c := &providers.Connection{Transport: "test", Profile: profile}
		if err := a.Resolve(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	names := func(ss []skills.Skill) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if diff := cmp.Diff([]string{"alpha", "global", "linked"}, names(m.For(conn("default")))); diff != "" {
		t.Errorf("default profile's skills (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"alpha"}, names(m.For(conn("c")))); diff != "" {
		t.Errorf("confined profile's skills (-want +got):\n%s", diff)
	}
	res := a.Call(t.Context(), conn("c"), app.Request{Tool: "skill", Args: json.RawMessage(`{"name":"linked"}`)})
	if want := `(no such skill "linked"; available: alpha)`; res.Err != nil || res.Text != want {
		t.Errorf("confined skill(linked) = %q, %v; want %s", res.Text, res.Err, want)
	}
	// An invalid skill outside the workspace is not described to a
	// confined profile either: its reason would show the outside file.
	write(t, filepath.Join(outside, "broken", skills.SkillFileName), "---\nname: broken\n---\nsecret\n")
	if err := os.Symlink(filepath.Join(outside, "broken"), filepath.Join(project, "broken")); err != nil {
		t.Fatal(err)
	}
	res = a.Call(t.Context(), conn("c"), app.Request{Tool: "skill", Args: json.RawMessage(`{"name":"broken"}`)})
	if want := `(no such skill "broken"; available: alpha)`; res.Err != nil || res.Text != want {
		t.Errorf("confined skill(broken) = %q, %v; want %s", res.Text, res.Err, want)
	}
	res = a.Call(t.Context(), conn("default"), app.Request{Tool: "skill", Args: json.RawMessage(`{"name":"broken"}`)})
	if want := "description must be 1 to 1024 characters)"; res.Err != nil || !strings.HasSuffix(res.Text, want) {
		t.Errorf("skill(broken) = %q, %v; want it to end in %s", res.Text, res.Err, want)
	}

	alpha := filepath.Join(project, "alpha", skills.SkillFileName)
	note := "\n\n(not expanded: ${config.nope.x}; a skill may only use the [skills.vars] the operator set in bub.toml)"
	body := "team infra, true, missing ${config.nope.x}, run py " + filepath.Dir(alpha) + "/go.py" + note
	want := "<available_skills>\n- alpha: First.\n  Location: " + alpha + "\n" + body + "\n</available_skills>"
	if got := m.PromptFor(conn("c"), "please use $alpha and $nothing", nil, "py"); got != want {
		t.Errorf("PromptFor = %q; want %q", got, want)
	}
	res = a.Call(t.Context(), conn("default"), app.Request{Tool: "skill", Args: json.RawMessage(`{"name":"alpha"}`)})
	if res.Err != nil || res.Text != "Location: "+alpha+"\n---\n"+"team infra, true, missing ${config.nope.x}, run python3 "+filepath.Dir(alpha)+"/go.py"+note {
		t.Errorf("skill(alpha) = %q, %v", res.Text, res.Err)
	}
}

// TestSkillVarsOnly plants SKILL.md files naming secrets of bub.toml, as
// a model can through fs.write or bash: nothing outside [skills.vars]
// expands, whatever the path, and the note names only what the skill
// itself wrote. Before [skills.vars], ${config.*} read all of bub.toml but
// [auth].
func TestSkillVarsOnly(t *testing.T) {
	const secrets = `
[server]
state_key = "S3CRET-state-key"
[store]
kind = "postgres"
dsn = "postgres://bub:S3CRET-dsn@127.0.0.1:1/bub?connect_timeout=1"
[upstreams.search]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer S3CRET-upstream-token" }
bearer_token_env = "S3CRET_ENV_NAME"
[skills.vars]
team = "infra"
[skills.vars.deploy]
region = "eu-west-1"
`
	tests := []struct {
		name, ref, want string
	}{
		{"state key", "${config.server.state_key}", "${config.server.state_key}"},
		{"whole server table", "${config.server}", "${config.server}"},
		{"store dsn", "${config.store.dsn}", "${config.store.dsn}"},
		{"whole store table", "${ config.store }", "${ config.store }"},
		{"upstream header", "${config.upstreams.search.headers.Authorization}", "${config.upstreams.search.headers.Authorization}"},
		{"upstream headers", "${config.upstreams.search.headers}", "${config.upstreams.search.headers}"},
		{"upstream bearer env", "${config.upstreams.search.bearer_token_env}", "${config.upstreams.search.bearer_token_env}"},
		{"all upstreams", "${config.upstreams}", "${config.upstreams}"},
		{"the vars table by its bub.toml path", "${config.skills.vars.team}", "${config.skills.vars.team}"},
		{"a var", "${config.team}", "infra"},
		{"a nested var", "${config.deploy.region}", "eu-west-1"},
		{"a var table", "${config.deploy}", "region: eu-west-1"},
	}
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	for i, tt := range tests {
		name := fmt.Sprintf("s%d", i)
		write(t, filepath.Join(ws, skills.ProjectSkillsDir, name, skills.SkillFileName),
			"---\nname: "+name+"\ndescription: Planted.\n---\nvalue: "+tt.ref+"\n")
	}
	a, _ := skillsApp(t, secrets, ws, "test.claim_upstreams")
	conn := &providers.Connection{Transport: "test", Profile: "default"}
	if err := a.Resolve(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := a.Call(t.Context(), conn, app.Request{Tool: "skill", Args: json.RawMessage(fmt.Sprintf(`{"name":"s%d"}`, i))})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if strings.Contains(res.Text, "S3CRET") {
				t.Fatalf("skill body leaks a secret of bub.toml:\n%s", res.Text)
			}
			_, body, _ := strings.Cut(res.Text, "\n---\n")
			want := "value: " + tt.want
			if tt.want == tt.ref {
				want += "\n\n(not expanded: ${config." + strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(tt.ref, "${"), " "), "}")[len("config."):]) +
					"}; a skill may only use the [skills.vars] the operator set in bub.toml)"
			}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("skill body (-want +got):\n%s", diff)
			}
		})
	}
}

func init() { app.RegisterModule(claimUpstreams{}) }

// claimUpstreams stands for the upstream module: it owns [upstreams],
// which the secrets test needs in bub.toml, without connecting anywhere.
type claimUpstreams struct{}

func (claimUpstreams) BubModule() app.ModuleInfo {
	return app.ModuleInfo{ID: "test.claim_upstreams", New: func() app.Module { return claimUpstreams{} }}
}

func (claimUpstreams) Provision(_ context.Context, a *app.App) error {
	var v anyTable
	return a.Config().Decode("upstreams", &v)
}

// anyTable takes a whole table, every key under it counted as known.
type anyTable map[string]any

func (t *anyTable) UnmarshalTOML(v any) error {
	*t, _ = v.(map[string]any)
	return nil
}

// skillsApp is an App of bub.toml src with the skills module only, over
// workspace ws, and its skills module.
func skillsApp(t *testing.T, src, ws string, extra ...string) (*app.App, *skills.Module) {
	t.Helper()
	mods := append([]string{"skills"}, extra...)
	cfg, err := config.Parse("bub.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Modules: mods, Home: t.TempDir(), Workspace: ws, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	mod, _ := a.Module("skills")
	return a, mod.(*skills.Module)
}

// TestSkillVarsNotATable: [skills] vars must be a table, and the error
// names the file, line and key.
func TestSkillVarsNotATable(t *testing.T) {
	cfg, err := config.Parse("bub.toml", "[skills]\nvars = \"infra\"\n", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.New(t.Context(), &app.Options{Config: cfg, Modules: []string{"skills"}, Home: t.TempDir(), Workspace: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "bub.toml:2") || !strings.Contains(err.Error(), "skills.vars: want a table") {
		t.Errorf("app.New with vars = \"infra\": %v; want an error at bub.toml:2 naming skills.vars", err)
	}
}
