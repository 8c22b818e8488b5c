package codemode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/app"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/google/go-cmp/cmp"
)

// TestApplyState checks the values state["code_mode"] may take.
func TestApplyState(t *testing.T) {
	tests := []struct {
		name    string
		state   map[string]any
		was     bool
		want    bool
		wantErr string
	}{
		{name: "absent keeps the setting", state: map[string]any{"request_id": "r1"}, was: true, want: true},
		{name: "nil state", was: true, want: true},
		{name: "null keeps the setting", state: map[string]any{"code_mode": nil}, was: true, want: true},
		{name: "true", state: map[string]any{"code_mode": true}, want: true},
		{name: "false", state: map[string]any{"code_mode": false}, was: true, want: false},
		{name: "string true (--state)", state: map[string]any{"code_mode": "true"}, want: true},
		{name: "string off", state: map[string]any{"code_mode": "off"}, was: true, want: false},
		{name: "JSON 1", state: map[string]any{"code_mode": float64(1)}, want: true},
		{name: "not a boolean", state: map[string]any{"code_mode": "maybe"}, was: true, want: true,
			wantErr: `state "code_mode": want true or false, got maybe`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := &providers.Connection{CodeMode: tt.was}
			err := app.ApplyState(conn, tt.state)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("ApplyState = %v; want %s", err, tt.wantErr)
				}
			} else if err != nil {
				t.Errorf("ApplyState: %v", err)
			}
			if conn.CodeMode != tt.want {
				t.Errorf("CodeMode = %v; want %v", conn.CodeMode, tt.want)
			}
		})
	}
}

// TestPerTurnCodeMode checks that state["code_mode"] switches code mode
// for one request only: the View a caller gets after ApplyState, a
// command's run_code (`bub-mcp call --state code_mode=true run_code`),
// and that nothing is stored.
func TestPerTurnCodeMode(t *testing.T) {
	needPython(t)
	a, _ := newApp(t, appOptions{})
	ctx := context.Background()
	view := func(profile string, state map[string]any) []string {
		t.Helper()
		conn, _ := resolve(t, a, profile)
		if err := app.ApplyState(conn, state); err != nil {
			t.Fatal(err)
		}
		v, err := a.View(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		return names(v.Tools)
	}
	has := func(tools []string, name string) bool {
		for _, n := range tools {
			if n == name {
				return true
			}
		}
		return false
	}
	on := map[string]any{"code_mode": true}
	off := map[string]any{"code_mode": "false"}
	if got := view("direct", on); !has(got, "run_code") || has(got, "orders.get") {
		t.Errorf("direct profile with code_mode=true lists %v; want the code-mode view", got)
	}
	if got := view("direct", nil); has(got, "run_code") || !has(got, "orders.get") {
		t.Errorf("direct profile after the turn lists %v; want direct tools (nothing stored)", got)
	}
	if got := view("default", off); has(got, "run_code") || !has(got, "orders.get") {
		t.Errorf("code-mode profile with code_mode=false lists %v; want direct tools", got)
	}
	if got := view("default", nil); !has(got, "run_code") {
		t.Errorf("code-mode profile after the turn lists %v; want run_code", got)
	}

	conn, _ := resolve(t, a, "direct")
	code := args(t, map[string]any{"code": "o = await tools.orders_get(order_id='9')\nprint(o['status'])"})
	res := a.Call(ctx, conn, app.Request{Tool: "run_code", Args: code, Mode: app.Command, State: map[string]any{"code_mode": "true"}})
	if res.Err != nil {
		t.Fatalf("run_code with code_mode=true: %v", res.Err)
	}
	if diff := cmp.Diff("shipped\n", res.Text); diff != "" {
		t.Errorf("run_code (-want +got):\n%s", diff)
	}
	if conn.CodeMode {
		t.Error("the caller's connection was changed")
	}
	res = a.Call(ctx, conn, app.Request{Tool: "run_code", Args: code, Mode: app.Command})
	if res.Err == nil || res.Err.Error() != "[invalid_input] Code mode is not enabled for this run." {
		t.Errorf("run_code without the state = %q, %v; want not enabled", res.Text, res.Err)
	}
	res = a.Call(ctx, conn, app.Request{Tool: "run_code", Args: code, Mode: app.Command, State: map[string]any{"code_mode": "maybe"}})
	if res.Err == nil || !strings.Contains(res.Err.Error(), `[invalid_input] state "code_mode"`) {
		t.Errorf("run_code with a bad state = %v; want an error naming the key", res.Err)
	}
	conn, _ = resolve(t, a, "direct")
	if conn.CodeMode {
		t.Error("the per-turn switch was stored in the session")
	}
}
