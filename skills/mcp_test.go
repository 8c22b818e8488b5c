package skills_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/mcpserver/streamhttp"
	"github.com/bubbuild/bub-mcp/skills"
	"github.com/google/go-cmp/cmp"
)

// skillsServer serves an App with the skills module over HTTP, profiles
// default, noskill (the skill tool denied) and confined; it returns the
// base URL and the workspace.
func skillsServer(t *testing.T) (string, string) {
	t.Helper()
	home, ws := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	src := "[profiles.noskill]\ndeny = [\"skill\"]\n[profiles.confined]\nconfine = true\n"
	a, mod := skillsApp(t, src, ws)
	srv, err := mcpserver.New(&mcpserver.Options{Backend: a, Registry: a.Registry(), Logger: slog.New(slog.DiscardHandler), Extensions: mod.MCPExtensions()})
	if err != nil {
		t.Fatal(err)
	}
	handler := streamhttp.New(srv, streamhttp.Options{Profiles: []string{"default", "noskill", "confined"}})
	closeSessions := handler.CloseSessions
	ts := httptest.NewServer(handler)
	t.Cleanup(func() { closeSessions(context.Background()); ts.Close() })
	return ts.URL, ws
}

// rpc sends a 2026-07-28 request of method with params (a JSON object's
// members, without braces) to url and returns the HTTP status and the
// decoded response.
func rpc(t *testing.T, url, method, params string) (int, map[string]any) {
	t.Helper()
	if params != "" {
		params += ","
	}
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":{%s"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`, method, params)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(line))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if i := strings.Index(params, `"uri":"`); i >= 0 && method == "resources/read" {
		uri := params[i+len(`"uri":"`):]
		req.Header.Set("Mcp-Name", uri[:strings.Index(uri, `"`)])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := strings.TrimSpace(string(b))
	if i := strings.LastIndex(body, "data: "); i >= 0 {
		body = body[i+len("data: "):]
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%s: HTTP %d %q: %v", method, resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestSkillsOverMCP serves a workspace's skills per SEP-2640 and checks
// what a host relies on: entries with the frontmatter as written and a
// digest of every file (dot files and links out of the skill are no part
// of it), skills/get for one skill and -32602 for anything else, the
// SKILL.md resources in resources/list, every listed file readable with
// the bytes its digest names, and the gates: a profile without the skill
// tool gets no skills, a confined one none from outside its workspace.
func TestSkillsOverMCP(t *testing.T) {
	url, ws := skillsServer(t)
	outside := t.TempDir()
	project := filepath.Join(ws, skills.ProjectSkillsDir)
	alpha := filepath.Join(project, "alpha")
	write(t, filepath.Join(alpha, skills.SkillFileName), "---\nname: alpha\ndescription: First skill.\nLicense: MIT\nmetadata:\n  version: \"2.1\"\n---\nUse references/GUIDE.md.\n")
	write(t, filepath.Join(alpha, "references", "GUIDE.md"), "# Guide\n")
	write(t, filepath.Join(alpha, "scripts", "run.py"), "print('hi')\n")
	write(t, filepath.Join(alpha, "logo.bin"), "\x00\xff\x10binary")
	write(t, filepath.Join(alpha, ".hidden"), "not part of the skill")
	write(t, filepath.Join(alpha, ".git", "HEAD"), "ref")
	write(t, filepath.Join(outside, "secret.txt"), "secret")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(alpha, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(outside, "linked", skills.SkillFileName), "---\nname: linked\ndescription: Lives elsewhere.\n---\nbody\n")
	if err := os.Symlink(filepath.Join(outside, "linked"), filepath.Join(project, "linked")); err != nil {
		t.Fatal(err)
	}

	status, got := rpc(t, url+"/mcp", "skills/list", "")
	if status != http.StatusOK {
		t.Fatalf("skills/list: HTTP %d %v", status, got)
	}
	res := got["result"].(map[string]any)
	wantAlpha := map[string]any{
		"uri":         "skill://alpha/SKILL.md",
		"frontmatter": map[string]any{"name": "alpha", "description": "First skill.", "License": "MIT", "metadata": map[string]any{"version": "2.1"}},
		"resources": []any{
			map[string]any{"uri": "skill://alpha/SKILL.md", "digest": sha(t, filepath.Join(alpha, "SKILL.md"))},
			map[string]any{"uri": "skill://alpha/logo.bin", "digest": sha(t, filepath.Join(alpha, "logo.bin"))},
			map[string]any{"uri": "skill://alpha/references/GUIDE.md", "digest": sha(t, filepath.Join(alpha, "references", "GUIDE.md"))},
			map[string]any{"uri": "skill://alpha/scripts/run.py", "digest": sha(t, filepath.Join(alpha, "scripts", "run.py"))},
		},
	}
	wantLinked := map[string]any{
		"uri":         "skill://linked/SKILL.md",
		"frontmatter": map[string]any{"name": "linked", "description": "Lives elsewhere."},
		"resources":   []any{map[string]any{"uri": "skill://linked/SKILL.md", "digest": sha(t, filepath.Join(outside, "linked", "SKILL.md"))}},
	}
	if diff := cmp.Diff([]any{wantAlpha, wantLinked}, res["skills"]); diff != "" {
		t.Errorf("skills/list (-want +got):\n%s", diff)
	}
	if res["cacheScope"] != "private" || res["ttlMs"] != float64(0) {
		t.Errorf("skills/list cache hints: %v %v", res["ttlMs"], res["cacheScope"])
	}

	_, got = rpc(t, url+"/mcp", "skills/get", `"uri":"skill://alpha/SKILL.md"`)
	if diff := cmp.Diff(map[string]any{"skill": wantAlpha}, got["result"]); diff != "" {
		t.Errorf("skills/get (-want +got):\n%s", diff)
	}
	for _, uri := range []string{"skill://nope/SKILL.md", "skill://alpha/references/GUIDE.md", "file:///etc/passwd", ""} {
		status, got := rpc(t, url+"/mcp", "skills/get", fmt.Sprintf(`"uri":%q`, uri))
		e, _ := got["error"].(map[string]any)
		if status != http.StatusBadRequest || e == nil || e["code"] != float64(-32602) {
			t.Errorf("skills/get %q: HTTP %d %v", uri, status, got)
		}
	}

	_, got = rpc(t, url+"/mcp", "resources/list", "")
	var listed []string
	for _, r := range got["result"].(map[string]any)["resources"].([]any) {
		r := r.(map[string]any)
		listed = append(listed, fmt.Sprint(r["uri"], " ", r["name"], " ", r["mimeType"], " ", r["description"]))
	}
	if diff := cmp.Diff([]string{"skill://alpha/SKILL.md alpha text/markdown First skill.", "skill://linked/SKILL.md linked text/markdown Lives elsewhere."}, listed); diff != "" {
		t.Errorf("resources/list (-want +got):\n%s", diff)
	}

	// Every listed file reads back with the bytes its digest names.
	for _, r := range wantAlpha["resources"].([]any) {
		r := r.(map[string]any)
		_, got := rpc(t, url+"/mcp", "resources/read", fmt.Sprintf(`"uri":%q`, r["uri"]))
		contents, _ := got["result"].(map[string]any)["contents"].([]any)
		if len(contents) != 1 {
			t.Errorf("read %s: %v", r["uri"], got)
			continue
		}
		c := contents[0].(map[string]any)
		data := []byte(fmt.Sprint(c["text"]))
		if blob, ok := c["blob"].(string); ok {
			data, _ = base64.StdEncoding.DecodeString(blob)
		}
		sum := sha256.Sum256(data)
		if d := "sha256:" + hex.EncodeToString(sum[:]); d != r["digest"] {
			t.Errorf("read %s: digest %s, listed %s", r["uri"], d, r["digest"])
		}
	}
	for _, uri := range []string{"skill://alpha/escape.txt", "skill://alpha/.hidden", "skill://alpha/../linked/SKILL.md", "skill://nope/SKILL.md", "skill://alpha/missing.md"} {
		if _, got := rpc(t, url+"/mcp", "resources/read", fmt.Sprintf(`"uri":%q`, uri)); got["error"] == nil {
			t.Errorf("read %s: %v, want an error", uri, got)
		}
	}

	// Gates.
	_, got = rpc(t, url+"/mcp/p/noskill", "skills/list", "")
	if diff := cmp.Diff(map[string]any{"skills": []any{}, "ttlMs": float64(0), "cacheScope": "private"}, got["result"]); diff != "" {
		t.Errorf("noskill skills/list (-want +got):\n%s", diff)
	}
	if _, got := rpc(t, url+"/mcp/p/noskill", "resources/read", `"uri":"skill://alpha/SKILL.md"`); got["error"] == nil {
		t.Errorf("noskill read: %v", got)
	}
	_, got = rpc(t, url+"/mcp/p/confined", "skills/list", "")
	if diff := cmp.Diff([]any{wantAlpha}, got["result"].(map[string]any)["skills"]); diff != "" {
		t.Errorf("confined skills/list (-want +got):\n%s", diff)
	}

	// A digest follows the file: an old file is remembered by its stamp,
	// and a changed one is read again.
	guide := filepath.Join(alpha, "references", "GUIDE.md")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(guide, old, old); err != nil {
		t.Fatal(err)
	}
	guideDigest := func() string {
		t.Helper()
		_, got := rpc(t, url+"/mcp", "skills/get", `"uri":"skill://alpha/SKILL.md"`)
		for _, r := range got["result"].(map[string]any)["skill"].(map[string]any)["resources"].([]any) {
			if r := r.(map[string]any); r["uri"] == "skill://alpha/references/GUIDE.md" {
				return r["digest"].(string)
			}
		}
		t.Fatalf("no GUIDE.md in %v", got)
		return ""
	}
	for range 2 {
		if got, want := guideDigest(), sha(t, guide); got != want {
			t.Errorf("GUIDE.md digest %s, want %s", got, want)
		}
	}
	write(t, guide, "# Guide, second edition\n")
	if got, want := guideDigest(), sha(t, guide); got != want {
		t.Errorf("after the edit, GUIDE.md digest %s, want %s", got, want)
	}
}

// TestSkillsListPages: more skills than a page come in pages joined by
// nextCursor, each skill once; a cursor that is no skill is refused.
func TestSkillsListPages(t *testing.T) {
	url, ws := skillsServer(t)
	const n = 130
	var want []string
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		write(t, filepath.Join(ws, skills.ProjectSkillsDir, name, skills.SkillFileName), "---\nname: "+name+"\ndescription: d\n---\n")
		want = append(want, "skill://"+name+"/SKILL.md")
	}
	var seen []string
	params, pages := "", 0
	for {
		_, got := rpc(t, url+"/mcp", "skills/list", params)
		res := got["result"].(map[string]any)
		for _, s := range res["skills"].([]any) {
			seen = append(seen, s.(map[string]any)["uri"].(string))
		}
		pages++
		next, _ := res["nextCursor"].(string)
		if next == "" || pages > n {
			break
		}
		params = fmt.Sprintf(`"cursor":%q`, next)
	}
	if diff := cmp.Diff(want, seen); diff != "" || pages != 2 {
		t.Errorf("%d pages; skills (-want +got):\n%s", pages, diff)
	}
	if status, got := rpc(t, url+"/mcp", "skills/list", `"cursor":"bogus"`); status != http.StatusBadRequest || got["error"] == nil {
		t.Errorf("bogus cursor: HTTP %d %v", status, got)
	}
}
