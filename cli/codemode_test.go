package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// codeModeServer is the real binary over stdio with a confined default
// profile and the given extra bub.toml lines.
type codeModeServer struct {
	c            *client.Client
	instructions string
	home, ws     string
	env          []string
	stderr       bytes.Buffer // the server's log, complete once logDone is closed
	logDone      chan struct{}
}

func codeModeEnv(t *testing.T, extra string) (home, ws string, env []string) {
	t.Helper()
	home, ws = t.TempDir(), t.TempDir()
	src := fmt.Sprintf("%s\n[profiles.default]\nworkspace = %q\nconfine = true\n", extra, ws)
	cfg := writeConfig(t, src)
	return home, ws, append(os.Environ(), "BUB_HOME="+home, "BUB_CONFIG="+cfg)
}

func startCodeMode(t *testing.T, home, ws string, env []string) *codeModeServer {
	t.Helper()
	s := &codeModeServer{home: home, ws: ws, env: env, logDone: make(chan struct{})}
	tr := transport.NewStdio(binary(t), env, "serve")
	c := client.NewClient(tr)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		defer close(s.logDone)
		_, _ = s.stderr.ReadFrom(tr.Stderr())
	}()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "codemode-test", Version: "0.1"}
	res, err := c.Initialize(t.Context(), init)
	if err != nil {
		t.Fatal(err)
	}
	s.c, s.instructions = c, res.Instructions
	return s
}

func listTools(t *testing.T, c *client.Client) map[string]mcp.Tool {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func bubCall(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"call"}, args...)...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bub-mcp call %v: %v", args, err)
	}
	return string(out)
}

// TestCodeModeOverStdio switches code mode on with `bub-mcp call`, then
// checks what an MCP client gets: the split tool list, the prompt in the
// instructions and in run_code's description, the stub as a resource and
// through fs_read despite confinement, and run_code making nested calls.
func TestCodeModeOverStdio(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	home, ws, env := codeModeEnv(t, "")
	if out := bubCall(t, env, "code_mode", "enable=true"); out != "Session code mode enabled (applies from the next turn).\n" {
		t.Fatalf("code_mode enable=true printed %q", out)
	}
	s := startCodeMode(t, home, ws, env)

	tools := listTools(t, s.c)
	for _, name := range []string{"run_code", "bash", "fs_read", "spill_read"} {
		if _, ok := tools[name]; !ok {
			t.Errorf("%s not listed", name)
		}
	}
	for _, name := range []string{"tape_info", "web_fetch", "code_mode"} {
		if _, ok := tools[name]; ok {
			t.Errorf("%s listed in code mode", name)
		}
	}
	if !strings.Contains(s.instructions, "<code_mode>") || !strings.Contains(tools["run_code"].Description, s.instructions) {
		t.Errorf("instructions %q; run_code description %q", s.instructions, tools["run_code"].Description)
	}
	path := filepath.Join(home, "codemode")
	if !strings.Contains(s.instructions, path) {
		t.Fatalf("instructions do not name a stub under %s: %q", path, s.instructions)
	}
	i := strings.Index(s.instructions, path)
	path = s.instructions[i : i+strings.Index(s.instructions[i:], ".pyi")+len(".pyi")]

	res, err := s.c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "bub://codemode/stub"}})
	if err != nil {
		t.Fatal(err)
	}
	var stub string
	if len(res.Contents) == 1 {
		if tc, ok := res.Contents[0].(mcp.TextResourceContents); ok {
			stub = tc.Text
		}
	}
	file, err := os.ReadFile(path)
	if err != nil || stub != string(file) || !strings.Contains(stub, "async def tape_info(") {
		t.Errorf("resource (%d chars) and stub file %s (%d chars, %v) differ or lack tape_info", len(stub), path, len(file), err)
	}
	// The stub of the real builtin tools is valid Python, with web.fetch's
	// whole result type.
	if out, err := exec.Command("python3", "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", path).CombinedOutput(); err != nil {
		t.Errorf("the stub does not parse as Python: %v\n%s", err, out)
	}
	if !strings.Contains(stub, "converted_from") {
		t.Errorf("the stub lacks web.fetch's converted_from")
	}
	read, err := callTool(t.Context(), s.c, "fs_read", map[string]any{"path": path}, nil)
	if err != nil || read.IsError || !strings.Contains(resultText(read), "async def tape_info(") {
		t.Errorf("fs_read of the stub in a confined profile: %v %v", resultText(read), err)
	}

	run, err := callTool(t.Context(), s.c, "run_code", map[string]any{"code": "info = await tools.tape_info()\nprint(type(info).__name__)"}, nil)
	if err != nil || run.IsError || resultText(run) != "dict\n" {
		t.Errorf("run_code = %q, %v", resultText(run), err)
	}

	if out := bubCall(t, env, "code_mode", "enable=false"); out != "Session code mode disabled (applies from the next turn).\n" {
		t.Errorf("code_mode enable=false printed %q", out)
	}
}

func TestCodeModeWithoutPython(t *testing.T) {
	home, ws, env := codeModeEnv(t, "[codemode]\npython = \"no-such-python-3\"\n")
	bubCall(t, env, "code_mode", "enable=true")
	s := startCodeMode(t, home, ws, env)
	tools := listTools(t, s.c)
	if _, ok := tools["run_code"]; ok {
		t.Error("run_code listed without Python")
	}
	if _, ok := tools["tape_info"]; !ok {
		t.Error("code mode did not fall back to direct tools")
	}
	s.c.Close()
	<-s.logDone
	if log := s.stderr.String(); strings.Count(log, "codemode.python.missing") != 1 || !strings.Contains(log, "[codemode] python") {
		t.Errorf("server log: want one warning naming [codemode] python:\n%s", log)
	}
}

// TestCallStateCodeMode: `bub-mcp call --state code_mode=true run_code`
// runs code mode for that call only, on a profile whose session has code
// mode off; nothing is stored, so the next call without it is refused, and
// a value that is no boolean is an error naming the key (issue 26 item 21).
func TestCallStateCodeMode(t *testing.T) {
	testenv.MustHaveExec(t, "python3", "apt-get install python3")
	home, ws, env := codeModeEnv(t, "")
	code := "code=i = await tools.tape_info()\nprint('entries' in i)"
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(binary(t), append([]string{"call"}, args...)...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("bub-mcp call %v: %v", args, err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	if out, errOut, c := run("--state", "code_mode=true", "run_code", code); c != 0 || out != "True\n" {
		t.Errorf("with --state code_mode=true: exit %d, %q, stderr %q; want True", c, out, errOut)
	}
	for _, args := range [][]string{{"run_code", code}, {"--state", "code_mode=false", "run_code", code}} {
		if out, errOut, c := run(args...); c == 0 || !strings.Contains(errOut, "Code mode is not enabled for this run.") {
			t.Errorf("%q: exit %d, %q, stderr %q; want code mode not enabled (nothing stored)", args, c, out, errOut)
		}
	}
	if out, errOut, c := run("--state", "code_mode=maybe", "run_code", code); c == 0 || !strings.Contains(errOut, `state "code_mode": want true or false, got maybe`) {
		t.Errorf("code_mode=maybe: exit %d, %q, stderr %q; want an error naming the key", c, out, errOut)
	}

	// Over stdio, _meta "bub/state" does the same for one MCP request.
	s := startCodeMode(t, home, ws, env)
	meta := &mcp.Meta{AdditionalFields: map[string]any{"bub/state": map[string]any{"code_mode": true}}}
	list := mcp.ListToolsRequest{}
	list.Params.Meta = meta
	res, err := s.c.ListTools(t.Context(), list)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "run_code") || slices.Contains(names, "tape_info") {
		t.Errorf("tools/list with code_mode=true = %v; want the code-mode tools", names)
	}
	if tools := listTools(t, s.c); tools["run_code"].Name != "" || tools["tape_info"].Name == "" {
		t.Errorf("tools/list without the state lists run_code or lacks tape_info: nothing may be stored")
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"code": strings.TrimPrefix(code, "code=")}
	req.Params.Meta = meta
	if r, err := s.c.CallTool(t.Context(), req); err != nil || r.IsError || resultText(r) != "True\n" {
		t.Errorf("run_code with _meta code_mode=true = %v, %v", r, err)
	}
}
