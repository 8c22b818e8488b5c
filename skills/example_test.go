package skills_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bubbuild/bub-mcp/skills"
)

// A skill is a directory under .agents/skills whose SKILL.md frontmatter
// names it; Prompt lists the workspace's skills for a model's system
// prompt.
func Example() {
	ws, err := os.MkdirTemp("", "bub-skills")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(ws)
	dir := filepath.Join(ws, skills.ProjectSkillsDir, "deploy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	skill := "---\nname: deploy\ndescription: Ship the service.\n---\nRun $PYTHON ship.py.\n"
	if err := os.WriteFile(filepath.Join(dir, skills.SkillFileName), []byte(skill), 0o644); err != nil {
		panic(err)
	}
	home := os.Getenv("HOME")
	os.Setenv("HOME", ws) // no global skills in the example
	defer os.Setenv("HOME", home)

	fmt.Println(skills.Prompt(ws))
	for _, s := range skills.DiscoverSkills(ws) {
		fmt.Println(s.Body("python3.13"))
	}
	// Output:
	// <available_skills>
	// - deploy: Ship the service.
	// </available_skills>
	// Run python3.13 ship.py.
}
