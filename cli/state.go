package cli

import (
	"fmt"
	"strings"
)

// maxStateEntries bounds --state: request-scoped state is a few ids, not
// a data channel.
const maxStateEntries = 64

// stateFlag is a repeatable --state key=value: the caller's request-scoped
// state (Bub's state=..., such as a request_id), which the tools of the
// call or turn see as ToolContext.State and nothing persists. Values are
// strings, as on a command line.
type stateFlag map[string]any

func (s *stateFlag) String() string {
	if s == nil || *s == nil {
		return ""
	}
	var parts []string
	for k, v := range *s {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, ",")
}

func (s *stateFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	if *s == nil {
		*s = stateFlag{}
	}
	if _, dup := (*s)[k]; !dup && len(*s) >= maxStateEntries {
		return fmt.Errorf("at most %d --state entries", maxStateEntries)
	}
	(*s)[k] = val
	return nil
}

// Type names the value in --help.
func (s *stateFlag) Type() string { return "key=value" }

// Map returns the state to hand to the App; nil when none was given.
func (s stateFlag) Map() map[string]any {
	if len(s) == 0 {
		return nil
	}
	return map[string]any(s)
}
