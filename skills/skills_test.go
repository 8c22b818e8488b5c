package skills

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/google/go-cmp/cmp"
)

func writeSkill(t *testing.T, root, dir, content string) string {
	t.Helper()
	p := filepath.Join(root, dir, SkillFileName)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newEnv is a real environment on a temporary workspace.
func newEnv(t *testing.T) *environment.LocalEnvironment {
	t.Helper()
	env, err := environment.NewLocal(&environment.LocalOptions{Workspace: t.TempDir()})
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

// newExec returns an executor over a registry holding m's skill tool.
func newExec(t *testing.T, m *Module) *registry.Executor {
	t.Helper()
	reg := registry.New()
	if err := reg.Register(m.Tool()); err != nil {
		t.Fatal(err)
	}
	return registry.NewExecutor(reg, &registry.ExecutorOptions{Logger: slog.New(slog.DiscardHandler)})
}

func TestSkills(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	env := newEnv(t)
	ws := env.Workspace()
	project := filepath.Join(ws, ProjectSkillsDir)
	alpha := writeSkill(t, project, "alpha", "---\nname: alpha\ndescription: First skill.\nmetadata:\n  owner: me\n---\n\nRun $PYTHON ${SKILL_DIR}/run.py; cost $$5; keep $OTHER.\n")
	writeSkill(t, project, "shared", "---\nname: shared\ndescription: 'project wins'\n---\nproject body")
	writeSkill(t, project, "bad-name", "---\nname: other\ndescription: mismatched dir\n---\n")
	writeSkill(t, project, "no-desc", "---\nname: no-desc\n---\n")
	writeSkill(t, project, "Upper", "---\nname: Upper\ndescription: bad pattern\n---\n")
	writeSkill(t, project, "badmeta", "---\nname: badmeta\ndescription: x\nmetadata:\n  - a\n---\n")
	writeSkill(t, project, "nofm", "just text")
	writeSkill(t, filepath.Join(ws, LegacySkillsDir), "legacy", "---\nname: legacy\ndescription: >\n  Folded\n  text.\n---\n")
	global := filepath.Join(home, ProjectSkillsDir)
	writeSkill(t, global, "shared", "---\nname: shared\ndescription: global loses\n---\nglobal body")
	writeSkill(t, global, "zeta", "---\nname: zeta\ndescription: \"Global \\\"quoted\\\".\"\n---\n")
	writeSkill(t, global, "empty", "---\nname: empty\ndescription: nothing inside\n---\n")

	exec := newExec(t, &Module{log: slog.New(slog.DiscardHandler)})
	tests := []struct {
		name  string
		args  string
		state map[string]any
		want  string
	}{
		{"list", `{}`, nil, "Available skills:\n- alpha\n- empty\n- legacy\n- shared\n- zeta"},
		{"load", `{"name":"alpha"}`, nil, "Location: " + alpha + "\n---\nRun python3 " + filepath.Dir(alpha) + "/run.py; cost $5; keep $OTHER."},
		{"project wins, any case", `{"name":"Shared"}`, nil, "Location: " + filepath.Join(project, "shared", SkillFileName) + "\n---\nproject body"},
		{"empty body", `{"name":"empty"}`, nil, "Location: " + filepath.Join(global, "empty", SkillFileName) + "\n---\n(no content)"},
		{"unknown", `{"name":"nope"}`, nil, `(no such skill "nope"; available: alpha, empty, legacy, shared, zeta)`},
		{"not allowed", `{"name":"alpha"}`, map[string]any{"allowed_skills": []string{"zeta"}}, "(skill 'alpha' is not allowed in this context)"},
		{"allowed as []any", `{"name":"zeta"}`, map[string]any{"allowed_skills": []any{"ZETA"}}, "Location: " + filepath.Join(global, "zeta", SkillFileName) + "\n---\n(no content)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := exec.Call(t.Context(), registry.Call{Tool: "skill", Args: []byte(tt.args), Context: &registry.ToolContext{Env: env, State: tt.state}})
			if res.Err != nil {
				t.Fatalf("skill(%s): %v", tt.args, res.Err)
			}
			if res.Text != tt.want {
				t.Errorf("skill(%s) = %q; want %q", tt.args, res.Text, tt.want)
			}
		})
	}

	wantPrompt := "<available_skills>\n- alpha: First skill.\n- empty: nothing inside\n- legacy: Folded text.\n- shared: project wins\n- zeta: Global \"quoted\".\n</available_skills>"
	if got := Prompt(ws); got != wantPrompt {
		t.Errorf("Prompt = %q; want %q", got, wantPrompt)
	}
	skills := DiscoverSkills(ws)
	if diff := cmp.Diff(map[string]string{"owner": "me"}, skills[0].Metadata); diff != "" {
		t.Errorf("alpha metadata (-want +got):\n%s", diff)
	}
}

func TestSkillWithoutEnvironment(t *testing.T) {
	exec := newExec(t, &Module{})
	res := exec.Call(t.Context(), registry.Call{Tool: "skill", Args: []byte(`{}`)})
	if res.Err == nil || res.Err.Kind != registry.KindConfig || res.Err.Message != "skill needs a workspace, and this call has none" {
		t.Errorf("skill without workspace = %v; want a config error", res.Err)
	}
}

func TestPromptEmpty(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	if got := Prompt(t.TempDir()); got != "" {
		t.Errorf("Prompt with no skills = %q; want empty", got)
	}
}

// A Module warns about a legacy directory once; each Module on its own.
func TestModuleWarnsOncePerLegacyDir(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ws := t.TempDir()
	writeSkill(t, filepath.Join(ws, LegacySkillsDir), "old", "---\nname: old\ndescription: legacy.\n---\n")
	var logs bytes.Buffer
	m := &Module{log: slog.New(slog.NewTextHandler(&logs, nil))}
	for range 3 {
		if got := m.Prompt(ws); got != "<available_skills>\n- old: legacy.\n</available_skills>" {
			t.Fatalf("Prompt = %q", got)
		}
	}
	if n := strings.Count(logs.String(), "skills.legacy_dir"); n != 1 {
		t.Errorf("one Module warned %d times; want once:\n%s", n, logs.String())
	}
	other := &Module{log: slog.New(slog.NewTextHandler(&logs, nil))}
	other.Discover(ws)
	if n := strings.Count(logs.String(), "skills.legacy_dir"); n != 2 {
		t.Errorf("a second Module did not warn on its own (%d warnings)", n)
	}
}
