package builtin

import (
	"os"
	"path/filepath"
	"testing"

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

func TestSkills(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	f := newFixture(t, nil)
	project := filepath.Join(f.ws, ProjectSkillsDir)
	alpha := writeSkill(t, project, "alpha", "---\nname: alpha\ndescription: First skill.\nmetadata:\n  owner: me\n---\n\nRun $PYTHON ${SKILL_DIR}/run.py; cost $$5; keep $OTHER.\n")
	writeSkill(t, project, "shared", "---\nname: shared\ndescription: 'project wins'\n---\nproject body")
	writeSkill(t, project, "bad-name", "---\nname: other\ndescription: mismatched dir\n---\n")
	writeSkill(t, project, "no-desc", "---\nname: no-desc\n---\n")
	writeSkill(t, project, "Upper", "---\nname: Upper\ndescription: bad pattern\n---\n")
	writeSkill(t, project, "badmeta", "---\nname: badmeta\ndescription: x\nmetadata:\n  - a\n---\n")
	writeSkill(t, project, "nofm", "just text")
	writeSkill(t, filepath.Join(f.ws, LegacySkillsDir), "legacy", "---\nname: legacy\ndescription: >\n  Folded\n  text.\n---\n")
	global := filepath.Join(home, ProjectSkillsDir)
	writeSkill(t, global, "shared", "---\nname: shared\ndescription: global loses\n---\nglobal body")
	writeSkill(t, global, "zeta", "---\nname: zeta\ndescription: \"Global \\\"quoted\\\".\"\n---\n")
	writeSkill(t, global, "empty", "---\nname: empty\ndescription: nothing inside\n---\n")

	if got, want := f.ok("skill", nil), "Available skills:\n- alpha\n- empty\n- legacy\n- shared\n- zeta"; got != want {
		t.Errorf("skill() = %q; want %q", got, want)
	}
	wantBody := "Run python3 " + filepath.Dir(alpha) + "/run.py; cost $5; keep $OTHER."
	if got, want := f.ok("skill", map[string]any{"name": "alpha"}), "Location: "+alpha+"\n---\n"+wantBody; got != want {
		t.Errorf("skill(alpha) = %q; want %q", got, want)
	}
	if got := f.ok("skill", map[string]any{"name": "Shared"}); got != "Location: "+filepath.Join(project, "shared", SkillFileName)+"\n---\nproject body" {
		t.Errorf("skill(Shared) = %q; want the project's", got)
	}
	if got := f.ok("skill", map[string]any{"name": "empty"}); got != "Location: "+filepath.Join(global, "empty", SkillFileName)+"\n---\n(no content)" {
		t.Errorf("skill(empty) = %q", got)
	}
	if got := f.ok("skill", map[string]any{"name": "nope"}); got != "(no such skill)" {
		t.Errorf("skill(nope) = %q", got)
	}

	res := f.exec.Call(t.Context(), registry.Call{Tool: "skill", Args: []byte(`{"name":"alpha"}`),
		Context: &registry.ToolContext{Env: f.env, State: map[string]any{"allowed_skills": []string{"zeta"}}}})
	if res.Text != "(skill 'alpha' is not allowed in this context)" {
		t.Errorf("skill(alpha) with allowed_skills=[zeta] = %q %v", res.Text, res.Err)
	}

	wantPrompt := "<available_skills>\n- alpha: First skill.\n- empty: nothing inside\n- legacy: Folded text.\n- shared: project wins\n- zeta: Global \"quoted\".\n</available_skills>"
	if got := SkillsPrompt(f.ws); got != wantPrompt {
		t.Errorf("SkillsPrompt = %q; want %q", got, wantPrompt)
	}
	skills := DiscoverSkills(f.ws)
	if diff := cmp.Diff(map[string]string{"owner": "me"}, skills[0].Metadata); diff != "" {
		t.Errorf("alpha metadata (-want +got):\n%s", diff)
	}
}

func TestSkillsPromptEmpty(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	if got := SkillsPrompt(t.TempDir()); got != "" {
		t.Errorf("SkillsPrompt with no skills = %q; want empty", got)
	}
}
