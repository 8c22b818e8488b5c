package skills

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/bubbuild/bub-mcp/registry"
)

// TestSkillNotFoundSaysWhy: asked for a skill it has not, the skill tool
// says why the directory of that name is skipped, so that its author can
// fix the SKILL.md, or else names the skills it can load; it says nothing
// of a name that could lead out of the skill roots.
func TestSkillNotFoundSaysWhy(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	env := newEnv(t)
	project := filepath.Join(env.Workspace(), ProjectSkillsDir)
	writeSkill(t, project, "good", "---\nname: good\ndescription: Fine.\n---\nbody")
	file := func(dir string) string { return filepath.Join(project, dir, SkillFileName) }
	writeSkill(t, project, "bad-yaml", "\n---\nname: bad-yaml\ndescription: [unclosed\n---\n")
	writeSkill(t, project, "no-close", "---\nname: no-close\ndescription: x\nbody\n")
	writeSkill(t, project, "mismatch", "---\nname: other\ndescription: x\n---\n")
	writeSkill(t, project, "no-desc", "---\nname: no-desc\n---\n")
	writeSkill(t, project, "list", "---\n- a\n---\n")
	writeSkill(t, project, "badmeta", "---\nname: badmeta\ndescription: x\nmetadata:\n  - a\n---\n")
	writeSkill(t, filepath.Dir(env.Workspace()), "escaped", "---\nname: escaped\ndescription: [unclosed\n---\n")

	exec := newExec(t, &Module{log: slog.New(slog.DiscardHandler)})
	tests := []struct{ name, want string }{
		{"nope", `(no such skill "nope"; available: good)`},
		{"bad-yaml", `(no such skill "bad-yaml"; it is skipped: ` + file("bad-yaml") +
			`: the frontmatter is not valid YAML: line 3: did not find expected ',' or ']')`},
		{"no-close", `(no such skill "no-close"; it is skipped: ` + file("no-close") +
			`: no frontmatter: the file must start with a line "---", then name: and description:, then a line "---")`},
		{"mismatch", `(no such skill "mismatch"; it is skipped: ` + file("mismatch") + `: name "other" differs from the directory name "mismatch")`},
		{"No-Desc", `(no such skill "No-Desc"; it is skipped: ` + file("no-desc") + `: description must be 1 to 1024 characters)`},
		{"list", `(no such skill "list"; it is skipped: ` + file("list") + `: the frontmatter must be a YAML mapping with name: and description:)`},
		{"badmeta", `(no such skill "badmeta"; it is skipped: ` + file("badmeta") + `: metadata must map strings to strings)`},
		{"../../escaped", `(no such skill "../../escaped"; available: good)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := exec.Call(t.Context(), registry.Call{Tool: "skill", Args: []byte(`{"name":"` + tt.name + `"}`), Context: &registry.ToolContext{Env: env}})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if res.Text != tt.want {
				t.Errorf("skill(%s) =\n%s\nwant\n%s", tt.name, res.Text, tt.want)
			}
		})
	}

	if err := os.RemoveAll(project); err != nil {
		t.Fatal(err)
	}
	res := exec.Call(t.Context(), registry.Call{Tool: "skill", Args: []byte(`{"name":"good"}`), Context: &registry.ToolContext{Env: env}})
	if want := `(no such skill "good"; this workspace has no skills (a skill is ` + file("<name>") + `))`; res.Text != want {
		t.Errorf("skill(good) without skills = %q; want %q", res.Text, want)
	}
}
