// Package skills finds the skills a workspace offers and hands them to
// models: discovery of SKILL.md directories (as Bub does), the skill tool
// that loads one, and the <available_skills> prompt fragment.
//
// The skill tool comes as the module "skills", which registers itself
// from init(); a binary enables it with a blank import:
//
//	import _ "github.com/bubbuild/bub-mcp/skills"
package skills

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/environment"
	"go.yaml.in/yaml/v4"
)

// Skill directories, relative to the workspace (project skills) and to the
// home directory (global skills), as in Bub.
const (
	// ProjectSkillsDir holds a workspace's skills, and under the home
	// directory the global ones.
	ProjectSkillsDir = ".agents/skills"
	// LegacySkillsDir is the old project directory, still read (with a
	// warning) so that existing workspaces keep their skills.
	LegacySkillsDir = ".agent/skills"
	// SkillFileName is the file that makes a directory a skill.
	SkillFileName = "SKILL.md"
)

var yamlLineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`line [0-9]+`) })

var skillNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`) })

// Skill is a discovered, valid skill: a directory holding a SKILL.md whose
// frontmatter names it.
type Skill struct {
	Name        string
	Description string
	// Location is the SKILL.md file, symlinks resolved.
	Location string
	// Metadata is the optional string map of the frontmatter's metadata.
	Metadata map[string]string
	// Frontmatter is the frontmatter as written (keys as the author cased
	// them), as JSON values: SEP-2640 hands it to MCP hosts verbatim.
	Frontmatter map[string]any
}

// Body returns the skill's instructions: the file without its
// frontmatter, with $SKILL_DIR and $PYTHON (also ${...}) substituted and
// "$$" turned into "$", so a skill can name its own files and the
// interpreter of the environment it runs in. python is the interpreter to
// name; empty means environment.DefaultPython. A file that cannot be read
// has an empty body. ${config.a.b} stays as written: Module.Body fills it
// in from the operator's [skills.vars] table.
func (s Skill) Body(python string) string {
	text, _ := s.render(python, nil)
	return text
}

// configRE matches ${config.a.b} (Bub's CONFIG_TEMPLATE_PATTERN).
var configRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{\s*config\.([a-zA-Z0-9_.-]+)\s*\}`) })

// render is Body with a lookup for ${config.a.b}; nil leaves them as
// written. A name the lookup does not have stays as written too, and is
// returned in missing (each once, in order), so the caller can say so.
func (s Skill) render(python string, vars func(path string) (any, bool)) (text string, missing []string) {
	data, err := os.ReadFile(s.Location)
	if err != nil {
		return "", nil
	}
	text = strings.TrimSpace(string(data))
	if _, rest, ok := splitFrontmatter(text); ok {
		text = strings.TrimSpace(rest)
	}
	if python == "" {
		python = environment.DefaultPython
	}
	if vars != nil {
		text = configRE().ReplaceAllStringFunc(text, func(m string) string {
			name := configRE().FindStringSubmatch(m)[1]
			v, ok := vars(name)
			if !ok {
				if !slices.Contains(missing, name) {
					missing = append(missing, name)
				}
				return m
			}
			return configText(v)
		})
	}
	return substitute(text, map[string]string{"SKILL_DIR": filepath.Dir(s.Location), "PYTHON": python}), missing
}

// configText renders a configuration value as Bub does: strings as they
// are, booleans as true/false, numbers in decimal, tables and arrays as
// YAML.
func configText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

// hintRE finds the $name hints of a prompt (Bub's HINT_RE).
var hintRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$([A-Za-z0-9_.-]+)`) })

// Hinted returns the names of the skills among skills that prompt names
// as $name (case-insensitively), whose bodies the skills prompt inlines.
func Hinted(prompt string, skills []Skill) map[string]bool {
	out := map[string]bool{}
	for _, m := range hintRE().FindAllStringSubmatch(prompt, -1) {
		for _, s := range skills {
			if strings.EqualFold(s.Name, m[1]) {
				out[s.Name] = true
			}
		}
	}
	return out
}

// Confined drops the skills whose folder resolves outside workspace (a
// symlink out of it, the global ~/.agents/skills), for profiles confined
// to their workspace: their files are out of the tools' reach too.
func Confined(skills []Skill, workspace string) []Skill {
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil
	}
	var out []Skill
	for _, s := range skills {
		dir := filepath.Dir(s.Location) // symlinks already resolved
		if rel, err := filepath.Rel(root, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			out = append(out, s)
		}
	}
	return out
}

// DiscoverSkills finds the skills available in workspace: first
// <workspace>/.agents/skills, then the legacy <workspace>/.agent/skills,
// then ~/.agents/skills. A name found twice keeps its first skill; invalid
// skills are skipped. The result is sorted by name.
//
// Every call that reads the legacy directory logs a warning to
// slog.Default(), since nothing outside a Module remembers having warned;
// Module.Discover warns once per directory.
func DiscoverSkills(workspace string) []Skill {
	log := slog.Default()
	return discover(workspace, log, func(string) bool { return true })
}

// discover is DiscoverSkills with its logger and a warnLegacy that says
// whether to warn about a legacy directory.
func discover(workspace string, log *slog.Logger, warnLegacy func(dir string) bool) []Skill {
	var roots []string
	if workspace != "" {
		roots = append(roots, filepath.Join(workspace, ProjectSkillsDir))
		legacy := filepath.Join(workspace, LegacySkillsDir)
		if st, err := os.Stat(legacy); err == nil && st.IsDir() {
			if warnLegacy(legacy) {
				log.Warn("skills.legacy_dir", "path", legacy, "hint", "move it to "+ProjectSkillsDir)
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
			s, ok := readSkill(dir, log)
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

// readSkill reads and validates dir/SKILL.md.
func readSkill(dir string, log *slog.Logger) (Skill, bool) {
	s, reason, found := parseSkill(dir)
	if !found {
		return Skill{}, false
	}
	if reason != "" {
		log.Debug("skills.skip", "path", filepath.Join(dir, SkillFileName), "reason", reason)
		return Skill{}, false
	}
	return s, true
}

// parseSkill reads and validates dir/SKILL.md. found is false when dir has
// no readable SKILL.md (it is no skill at all); otherwise reason says why
// the file is not a valid skill, or is empty when it is.
func parseSkill(dir string) (s Skill, reason string, found bool) {
	file := filepath.Join(dir, SkillFileName)
	st, err := os.Stat(file)
	if err != nil || !st.Mode().IsRegular() {
		return Skill{}, "", false
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return Skill{}, "", false
	}
	text := strings.TrimSpace(string(data))
	fm, _, ok := splitFrontmatter(text)
	if !ok {
		return Skill{}, "no frontmatter: the file must start with a line \"---\", then name: and description:, then a line \"---\"", true
	}
	meta, raw := parseFrontmatter(fm)
	if raw == nil {
		// The frontmatter's first line is the file's line after the first
		// "---", which follows whatever blank lines TrimSpace took.
		first := strings.Count(string(data[:strings.Index(string(data), text)]), "\n") + 2
		return Skill{}, frontmatterProblem(fm, first), true
	}
	name, _ := meta["name"].(string)
	desc, _ := meta["description"].(string)
	name, desc = strings.TrimSpace(name), strings.TrimSpace(desc)
	switch {
	case name == "" || len(name) > 64 || !skillNameRE().MatchString(name):
		reason = "name must match ^[a-z0-9]+(-[a-z0-9]+)*$ and be at most 64 characters"
	case name != filepath.Base(dir):
		reason = fmt.Sprintf("name %q differs from the directory name %q", name, filepath.Base(dir))
	case desc == "" || len(desc) > 1024:
		reason = "description must be 1 to 1024 characters"
	}
	s = Skill{Name: name, Description: desc, Location: file, Frontmatter: raw}
	if reason == "" && meta["metadata"] != nil {
		if m, ok := stringMap(meta["metadata"]); ok {
			s.Metadata = m
		} else {
			reason = "metadata must map strings to strings"
		}
	}
	if reason != "" {
		return Skill{}, reason, true
	}
	if real, err := filepath.EvalSymlinks(file); err == nil {
		s.Location = real
	}
	if abs, err := filepath.Abs(s.Location); err == nil {
		s.Location = abs
	}
	return s, "", true
}

// frontmatterProblem says why parseFrontmatter found no mapping in fm,
// whose first line is the file's line first; YAML's line numbers are made
// the file's, which is where the author looks.
func frontmatterProblem(fm string, first int) string {
	if len(fm) > maxFrontmatter {
		return fmt.Sprintf("the frontmatter is over %d KiB", maxFrontmatter>>10)
	}
	var doc any
	if err := yaml.Unmarshal([]byte(fm), &doc); err != nil {
		msg := yamlLineRE().ReplaceAllStringFunc(strings.TrimPrefix(err.Error(), "yaml: "), func(m string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
			return "line " + strconv.Itoa(n+first-1)
		})
		return "the frontmatter is not valid YAML: " + msg
	}
	return "the frontmatter must be a YAML mapping with name: and description:"
}

// skipped says why the skill directory called name under workspace's
// skill roots (the home one too unless confined) is not offered: the
// first such directory whose SKILL.md is invalid, as "<file>: <reason>";
// empty when there is none. name must be a valid skill name, so that it
// cannot lead outside a root.
func skipped(workspace, name string, confined bool) string {
	if !skillNameRE().MatchString(name) {
		return ""
	}
	var roots []string
	if workspace != "" {
		roots = append(roots, filepath.Join(workspace, ProjectSkillsDir), filepath.Join(workspace, LegacySkillsDir))
	}
	if home, err := os.UserHomeDir(); err == nil && !confined {
		roots = append(roots, filepath.Join(home, ProjectSkillsDir))
	}
	for _, root := range roots {
		dir := filepath.Join(root, name)
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		if confined && len(Confined([]Skill{{Location: filepath.Join(real, SkillFileName)}}, workspace)) == 0 {
			continue // its folder resolves outside the workspace: say nothing of it
		}
		if _, reason, found := parseSkill(dir); found && reason != "" {
			return filepath.Join(dir, SkillFileName) + ": " + reason
		}
	}
	return ""
}

// Prompt is the prompt fragment that tells a model which skills the
// workspace offers, or "" when there are none:
//
//	<available_skills>
//	- name: description
//	</available_skills>
func Prompt(workspace string) string {
	return FormatSkills(DiscoverSkills(workspace))
}

// FormatSkills is Prompt for a given list (say, the skills a subagent may
// use); empty for none.
func FormatSkills(skills []Skill) string { return FormatExpanded(skills, nil) }

// FormatExpanded is FormatSkills with the bodies of some skills inlined
// (by name), each under its line with its location, as Bub renders the
// skills a prompt names with $name:
//
//   - name: description
//     Location: /path/SKILL.md
//     <body>
func FormatExpanded(skills []Skill, bodies map[string]string) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("<available_skills>\n")
	for _, s := range skills {
		b.WriteString("- " + s.Name + ": " + s.Description + "\n")
		if body, ok := bodies[s.Name]; ok {
			b.WriteString("  Location: " + s.Location + "\n")
			if body != "" {
				b.WriteString(body + "\n")
			}
		}
	}
	b.WriteString("</available_skills>")
	return b.String()
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

var templateRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\$(?:(\$)|([_a-zA-Z][_a-zA-Z0-9]*)|\{([_a-zA-Z][_a-zA-Z0-9]*)\})`)
})

// substitute expands $NAME and ${NAME} from vars and "$$" to "$", leaving
// unknown names as they are (Python's Template.safe_substitute).
func substitute(text string, vars map[string]string) string {
	return templateRE().ReplaceAllStringFunc(text, func(m string) string {
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
