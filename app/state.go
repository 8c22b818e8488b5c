package app

import (
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/providers"
)

// StateCodeMode is the request-scoped state key (ToolContext.State: the
// SDK's Turn.State, the CLI's --state, MCP's _meta "bub/state") that
// switches code mode for one request or turn only, as Bub's
// state["code_mode"] = True does for SDK callers. Nothing stores it: the
// session's own setting applies again to the next request without it.
const StateCodeMode = "code_mode"

// ApplyState applies the request-scoped settings in state to the resolved
// connection conn (after Resolve, before View): today the per-turn code
// mode switch, StateCodeMode. A value of true or false (a JSON boolean,
// or "true"/"false", "1"/"0", "yes"/"no", "on"/"off" as typed on a command
// line) overrides the profile and session setting; anything else is an
// error naming the key. The View cache keys on the result, so a per-turn
// View is kept apart from the session's.
func ApplyState(conn *providers.Connection, state map[string]any) error {
	v, ok := state[StateCodeMode]
	if !ok || v == nil {
		return nil
	}
	on, err := stateBool(v)
	if err != nil {
		return fmt.Errorf("state %q: %w", StateCodeMode, err)
	}
	conn.CodeMode = on
	return nil
}

// stateBool reads a boolean as leniently as Bub's pydantic does.
func stateBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "1", "yes", "on", "t", "y":
			return true, nil
		case "false", "0", "no", "off", "f", "n":
			return false, nil
		}
	case float64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	}
	return false, fmt.Errorf("want true or false, got %v", v)
}
