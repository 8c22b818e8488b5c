package skills_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/skills"
	"github.com/google/go-cmp/cmp"
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

// TestModuleSkills: ${config.a.b} comes from bub.toml, $name in a prompt
// inlines that skill, and a confined profile sees only the skills whose
// folders resolve inside its workspace.
func TestModuleSkills(t *testing.T) {
	home, ws, outside := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	project := filepath.Join(ws, skills.ProjectSkillsDir)
	write(t, filepath.Join(project, "alpha", skills.SkillFileName), "---\nname: alpha\ndescription: First.\n---\ngrace ${config.server.shutdown_grace}, ${ config.profiles.c.confine }, missing ${config.nope.x}, run $PYTHON $SKILL_DIR/go.py\n")
	write(t, filepath.Join(outside, "linked", skills.SkillFileName), "---\nname: linked\ndescription: Lives elsewhere.\n---\nsecret\n")
	if err := os.Symlink(filepath.Join(outside, "linked"), filepath.Join(project, "linked")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, skills.ProjectSkillsDir, "global", skills.SkillFileName), "---\nname: global\ndescription: From home.\n---\n")

	a, m := skillsApp(t, "[server]\nshutdown_grace = \"7s\"\n[profiles.c]\nconfine = true\n", ws)
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
	if res.Err != nil || res.Text != "(no such skill)" {
		t.Errorf("confined skill(linked) = %q, %v; want (no such skill)", res.Text, res.Err)
	}

	alpha := filepath.Join(project, "alpha", skills.SkillFileName)
	body := "grace 7s, true, missing ${config.nope.x}, run py " + filepath.Dir(alpha) + "/go.py"
	want := "<available_skills>\n- alpha: First.\n  Location: " + alpha + "\n" + body + "\n</available_skills>"
	if got := m.PromptFor(conn("c"), "please use $alpha and $nothing", nil, "py"); got != want {
		t.Errorf("PromptFor = %q; want %q", got, want)
	}
	res = a.Call(t.Context(), conn("default"), app.Request{Tool: "skill", Args: json.RawMessage(`{"name":"alpha"}`)})
	if res.Err != nil || res.Text != "Location: "+alpha+"\n---\n"+"grace 7s, true, missing ${config.nope.x}, run python3 "+filepath.Dir(alpha)+"/go.py" {
		t.Errorf("skill(alpha) = %q, %v", res.Text, res.Err)
	}
}

// skillsApp is an App of bub.toml src with the skills module only, over
// workspace ws, and its skills module.
func skillsApp(t *testing.T, src, ws string) (*app.App, *skills.Module) {
	t.Helper()
	cfg, err := config.Parse("bub.toml", src, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), &app.Options{Config: cfg, Modules: []string{"skills"}, Home: t.TempDir(), Workspace: ws, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	mod, _ := a.Module("skills")
	return a, mod.(*skills.Module)
}
