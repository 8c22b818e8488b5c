package skills

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bubbuild/bub-mcp/environment"
	"github.com/bubbuild/bub-mcp/registry"
	"github.com/invopop/jsonschema"
)

type skillArgs struct {
	Name *string `json:"name,omitempty" jsonschema:"nullable" jsonschema_description:"The skill to load. Omit it to list the available skills."`
}

// JSONSchemaExtend moves the nullable name's description up to the
// property, where models and clients look for it.
func (skillArgs) JSONSchemaExtend(s *jsonschema.Schema) { registry.HoistNullable(s) }

// Result is the skill tool's structured result: the list of skills (no
// name given), one skill's location and content, or an error such as "no
// such skill". Bub answers those errors as text rather than failing the
// call, so the model reads them like any other answer.
type Result struct {
	Skills   []string `json:"skills,omitempty"`
	Name     string   `json:"name,omitempty"`
	Location string   `json:"location,omitempty"`
	Content  string   `json:"content,omitempty"`
	Error    string   `json:"error,omitempty"`
}

func renderSkill(r Result) string {
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

// Tool returns a new skill tool that discovers through m, so its warnings
// about legacy directories are m's. Provision registers it; tests call it
// directly.
// toolName is the skill tool's name.
const toolName = "skill"

func (m *Module) Tool() *registry.Tool {
	return registry.MustNewTool(toolName,
		"Load the skill content by name. Return the location and skill content.\n"+
			"If name is not provided, list all available skills in the current workspace.",
		m.run,
		registry.WithRenderer(renderSkill),
		registry.WithAnnotations(registry.Annotations{Title: "Load a skill", ReadOnly: true, Idempotent: true}))
}

// run finds the workspace in the call's Environment (whose interpreter
// $PYTHON names) or, without one, in its Session.
func (m *Module) run(ctx context.Context, tc *registry.ToolContext, in skillArgs) (Result, error) {
	workspace, python := "", ""
	switch {
	case tc != nil && tc.Env != nil:
		workspace, python = tc.Env.Workspace(), environment.PythonOf(tc.Env)
	case tc != nil && tc.Session != nil:
		workspace = tc.Session.Workspace()
	}
	if workspace == "" {
		return Result{}, &registry.Error{Kind: registry.KindConfig, Message: "skill needs a workspace, and this call has none"}
	}
	if in.Name != nil && *in.Name != "" && !allowed(tc, *in.Name) {
		return Result{Error: "skill '" + *in.Name + "' is not allowed in this context"}, nil
	}
	skills := m.Discover(workspace)
	confined := tc != nil && tc.Conn != nil && m.confined(tc.Conn.Profile)
	if confined {
		skills = Confined(skills, workspace)
	}
	if in.Name == nil {
		names := make([]string, len(skills))
		for i, s := range skills {
			names[i] = s.Name
		}
		return Result{Skills: names}, nil
	}
	want := strings.ToLower(*in.Name)
	for _, s := range skills {
		if s.Name == want {
			return Result{Name: s.Name, Location: s.Location, Content: m.Body(s, python)}, nil
		}
	}
	return Result{Error: notFound(workspace, *in.Name, skills, confined)}, nil
}

// notFound is the skill tool's answer for a name it has no skill for,
// Bub's "no such skill" followed by what the model can do about it: why
// the skill directory of that name is skipped (so the skill's author can
// fix its SKILL.md), else the names it can load.
func notFound(workspace, name string, skills []Skill, confined bool) string {
	msg := fmt.Sprintf("no such skill %q", name)
	if why := skipped(workspace, strings.ToLower(name), confined); why != "" {
		return msg + "; it is skipped: " + why
	}
	if len(skills) == 0 {
		return msg + "; this workspace has no skills (a skill is " + filepath.Join(workspace, ProjectSkillsDir, "<name>", SkillFileName) + ")"
	}
	names := make([]string, len(skills))
	for i, s := range skills {
		names[i] = s.Name
	}
	return msg + "; available: " + strings.Join(names, ", ")
}

// allowed applies a run's allowed_skills (ToolContext.State), as Bub's
// subagents set it; no list means every skill is allowed.
func allowed(tc *registry.ToolContext, name string) bool {
	if tc == nil || tc.State == nil {
		return true
	}
	var list []string
	switch v := tc.State["allowed_skills"].(type) {
	case nil:
		return true
	case []string:
		list = v
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				list = append(list, s)
			}
		}
	default:
		return true
	}
	return slices.ContainsFunc(list, func(a string) bool { return strings.EqualFold(a, name) })
}
