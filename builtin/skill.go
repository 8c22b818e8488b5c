package builtin

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/bubbuild/bub-mcp/sessions"
)

// Skill directories, relative to the workspace (project skills) and to the
// home directory (global skills), as in Bub.
const (
	ProjectSkillsDir = ".agents/skills"
	LegacySkillsDir  = ".agent/skills"
	SkillFileName    = "SKILL.md"
)

var skillNameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Skill is a discovered, valid skill: a directory holding a SKILL.md whose
// frontmatter names it.
type Skill struct {
	Name        string
	Description string
	// Location is the SKILL.md file, symlinks resolved.
	Location string
	// Metadata is the optional string map of the frontmatter's metadata.
	Metadata map[string]string
}

// Body returns the skill's instructions: the file without its
// frontmatter, with $SKILL_DIR and $PYTHON (also ${...}) substituted and
// "$$" turned into "$". python is the interpreter to name; empty means
// "python3". A file that cannot be read has an empty body.
func (s Skill) Body(python string) string {
	data, err := os.ReadFile(s.Location)
	if err != nil {
		return ""
	}
	text := strings.TrimSpace(string(data))
	if _, rest, ok := splitFrontmatter(text); ok {
		text = strings.TrimSpace(rest)
	}
	if python == "" {
		python = environment.DefaultPython
	}
	return substitute(text, map[string]string{"SKILL_DIR": filepath.Dir(s.Location), "PYTHON": python})
}

// DiscoverSkills finds the skills available in workspace: first
// <workspace>/.agents/skills, then the legacy <workspace>/.agent/skills
// (with a warning), then ~/.agents/skills. A name found twice keeps its
// first skill; invalid skills are skipped. The result is sorted by name.
func DiscoverSkills(workspace string) []Skill {
	var roots []string
	if workspace != "" {
		roots = append(roots, filepath.Join(workspace, ProjectSkillsDir))
		legacy := filepath.Join(workspace, LegacySkillsDir)
		if st, err := os.Stat(legacy); err == nil && st.IsDir() {
			if _, warned := legacyWarned.LoadOrStore(legacy, true); !warned {
				slog.Warn("skills.legacy_dir", "path", legacy, "hint", "move it to "+ProjectSkillsDir)
			}
			roots = append(roots, legacy)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, ProjectSkillsDir))
	}
	byName := map[string]Skill{}
	for _, root := range roots {
		entries, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(root, e.Name())
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				continue
			}
			s, ok := readSkill(dir)
			if !ok {
				continue
			}
			if _, dup := byName[s.Name]; !dup {
				byName[s.Name] = s
			}
		}
	}
	out := make([]Skill, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// legacyWarned keeps the legacy-directory warning to once per path.
var legacyWarned sync.Map

// readSkill reads and validates dir/SKILL.md.
func readSkill(dir string) (Skill, bool) {
	file := filepath.Join(dir, SkillFileName)
	st, err := os.Stat(file)
	if err != nil || !st.Mode().IsRegular() {
		return Skill{}, false
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return Skill{}, false
	}
	fm, _, ok := splitFrontmatter(strings.TrimSpace(string(data)))
	if !ok {
		slog.Debug("skills.skip", "path", file, "reason", "no frontmatter")
		return Skill{}, false
	}
	meta := parseFrontmatter(fm)
	name, _ := meta["name"].(string)
	desc, _ := meta["description"].(string)
	name, desc = strings.TrimSpace(name), strings.TrimSpace(desc)
	var reason string
	switch {
	case name == "" || len(name) > 64 || !skillNameRE.MatchString(name):
		reason = "name must match ^[a-z0-9]+(-[a-z0-9]+)*$ and be at most 64 characters"
	case name != filepath.Base(dir):
		reason = "name differs from the directory name"
	case desc == "" || len(desc) > 1024:
		reason = "description must be 1 to 1024 characters"
	}
	s := Skill{Name: name, Description: desc, Location: file}
	if reason == "" {
		switch m := meta["metadata"].(type) {
		case nil:
		case map[string]string:
			s.Metadata = m
		default:
			reason = "metadata must map strings to strings"
		}
	}
	if reason != "" {
		slog.Debug("skills.skip", "path", file, "reason", reason)
		return Skill{}, false
	}
	if real, err := filepath.EvalSymlinks(file); err == nil {
		s.Location = real
	}
	if abs, err := filepath.Abs(s.Location); err == nil {
		s.Location = abs
	}
	return s, true
}

// SkillsPrompt is the prompt fragment that tells a model which skills the
// workspace offers, or "" when there are none:
//
//	<available_skills>
//	- name: description
//	</available_skills>
func SkillsPrompt(workspace string) string {
	return FormatSkills(DiscoverSkills(workspace))
}

// FormatSkills is SkillsPrompt for a given list (say, the skills a
// subagent may use); empty for none.
func FormatSkills(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<available_skills>\n")
	for _, s := range skills {
		b.WriteString("- " + s.Name + ": " + s.Description + "\n")
	}
	b.WriteString("</available_skills>")
	return b.String()
}

type skillArgs struct {
	Name *string `json:"name,omitempty" jsonschema:"nullable" jsonschema_description:"The skill to load. Omit it to list the available skills."`
}

// SkillResult is skill's structured result: the list of skills (no name
// given), one skill's location and content, or an error such as "no such
// skill".
type SkillResult struct {
	Skills   []string `json:"skills,omitempty"`
	Name     string   `json:"name,omitempty"`
	Location string   `json:"location,omitempty"`
	Content  string   `json:"content,omitempty"`
	Error    string   `json:"error,omitempty"`
}

func renderSkill(r SkillResult) string {
	switch {
	case r.Error != "":
		return "(" + r.Error + ")"
	case r.Name == "":
		return "Available skills:\n" + strings.Join(prefixed("- ", r.Skills), "\n")
	case r.Content == "":
		return "Location: " + r.Location + "\n---\n(no content)"
	}
	return "Location: " + r.Location + "\n---\n" + r.Content
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

func skillTool() *registry.Tool {
	return registry.MustNewTool("skill",
		"Load the skill content by name. Return the location and skill content.\n"+
			"If name is not provided, list all available skills in the current workspace.",
		runSkill,
		registry.WithRenderer(renderSkill),
		registry.WithAnnotations(registry.Annotations{Title: "Load a skill", ReadOnly: true, Idempotent: true}))
}

func runSkill(ctx context.Context, tc *registry.ToolContext, in skillArgs) (SkillResult, error) {
	workspace := ""
	python := ""
	if tc != nil && tc.Env != nil {
		workspace = tc.Env.Workspace()
		if env, ok := tc.Env.(environment.Environment); ok {
			python = environment.PythonOf(env)
		}
	} else if sess, ok := sessions.FromContext(ctx); ok {
		workspace = sess.Workspace()
	}
	if workspace == "" {
		return SkillResult{}, fail(registry.KindConfig, "skill needs a workspace, and this call has none")
	}
	if in.Name != nil && *in.Name != "" && !skillAllowed(tc, *in.Name) {
		return SkillResult{Error: "skill '" + *in.Name + "' is not allowed in this context"}, nil
	}
	skills := DiscoverSkills(workspace)
	if in.Name == nil {
		names := make([]string, len(skills))
		for i, s := range skills {
			names[i] = s.Name
		}
		return SkillResult{Skills: names}, nil
	}
	want := strings.ToLower(*in.Name)
	for _, s := range skills {
		if s.Name == want {
			return SkillResult{Name: s.Name, Location: s.Location, Content: s.Body(python)}, nil
		}
	}
	return SkillResult{Error: "no such skill"}, nil
}

// skillAllowed applies a run's allowed_skills (ToolContext.State), as
// Bub's subagents set it; no list means every skill is allowed.
func skillAllowed(tc *registry.ToolContext, name string) bool {
	if tc == nil || tc.State == nil {
		return true
	}
	var allowed []string
	switch v := tc.State["allowed_skills"].(type) {
	case nil:
		return true
	case []string:
		allowed = v
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				allowed = append(allowed, s)
			}
		}
	default:
		return true
	}
	return slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, name) })
}

// splitFrontmatter splits "---\n<yaml>\n---\n<body>" text; ok is false
// when text does not start with a frontmatter block.
func splitFrontmatter(text string) (fm, body string, ok bool) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return "", text, false
	}
	n := len(lines[0])
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "---" {
			return text[len(lines[0]):n], text[n+len(l):], true
		}
		n += len(l)
	}
	return "", text, false
}

var templateRE = regexp.MustCompile(`\$(?:(\$)|([_a-zA-Z][_a-zA-Z0-9]*)|\{([_a-zA-Z][_a-zA-Z0-9]*)\})`)

// substitute expands $NAME and ${NAME} from vars and "$$" to "$", leaving
// unknown names as they are (Python's Template.safe_substitute).
func substitute(text string, vars map[string]string) string {
	return templateRE.ReplaceAllStringFunc(text, func(m string) string {
		// m is "$$", "$NAME" or "${NAME}": no need to match it again.
		if m == "$$" {
			return "$"
		}
		name := strings.TrimSuffix(strings.TrimPrefix(m[1:], "{"), "}")
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}
