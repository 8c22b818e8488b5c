package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The mcp.json files real clients write are read: their own fields are
// ignored (and named once), "disabled" servers are left out, and
// ${VAR}/${env:VAR} are expanded in command, args, env, url and headers.
func TestMCPJSONDialects(t *testing.T) {
	vars := map[string]string{"HOME": "/home/u", "API_KEY": "sk-secret", "PORT": "8931"}
	getenv := func(k string) string { return vars[k] }
	type server struct {
		Name, Kind, Command, URL string
		Args                     []string
		Env, Headers             map[string]string
	}
	for _, tc := range []struct {
		name, doc string
		want      []server
		disabled  []string
		ignored   []string
		err       string // a substring of the error; "" means none
	}{{
		name: "claude desktop",
		doc: `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/work"],
			"env": {"TOKEN": "${API_KEY}"}}}}`,
		want: []server{{Name: "fs", Kind: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/u/work"},
			Env: map[string]string{"TOKEN": "sk-secret"}}},
	}, {
		name: "cursor, env: prefix and http",
		doc: `{"mcpServers": {"remote": {"url": "http://127.0.0.1:${env:PORT}/mcp", "headers": {"Authorization": "Bearer ${env:API_KEY}"}},
			"local": {"type": "stdio", "command": "${HOME}/bin/srv", "args": []}}}`,
		want: []server{
			{Name: "local", Kind: "stdio", Command: "/home/u/bin/srv"},
			{Name: "remote", Kind: "http", URL: "http://127.0.0.1:8931/mcp", Headers: map[string]string{"Authorization": "Bearer sk-secret"}},
		},
	}, {
		name: "cline: autoApprove, disabled, timeout, transportType sse",
		doc: `{"mcpServers": {
			"a": {"command": "srv-a", "autoApprove": ["read"], "disabled": false, "timeout": 60},
			"b": {"command": "srv-b", "disabled": true, "alwaysAllow": []},
			"c": {"url": "http://localhost:1/sse", "transportType": "sse"}}}`,
		want:     []server{{Name: "a", Kind: "stdio", Command: "srv-a"}, {Name: "c", Kind: "sse", URL: "http://localhost:1/sse"}},
		disabled: []string{"b"},
		ignored:  []string{"a.autoApprove", "a.timeout", "b.alwaysAllow"},
	}, {
		name: "gemini: trust, httpUrl, timeout",
		doc: `{"mcpServers": {"g": {"httpUrl": "https://mcp.example.com/mcp", "trust": true, "timeout": 30000},
			"s": {"url": "https://mcp.example.com/sse", "type": "sse"}}}`,
		want:    []server{{Name: "g", Kind: "http", URL: "https://mcp.example.com/mcp"}, {Name: "s", Kind: "sse", URL: "https://mcp.example.com/sse"}},
		ignored: []string{"g.timeout", "g.trust"},
	}, {
		name: "vs code servers key, default value",
		doc:  `{"servers": {"v": {"type": "http", "url": "http://localhost:${UNSET_PORT:-3000}/mcp"}}, "inputs": []}`,
		want: []server{{Name: "v", Kind: "http", URL: "http://localhost:3000/mcp"}},
	}, {
		name: "null is no value, as encoding/json reads it",
		doc:  `{"mcpServers": {"n": {"command": "a", "args": null, "env": null, "disabled": null}}, "servers": null}`,
		want: []server{{Name: "n", Kind: "stdio", Command: "a"}},
	}, {
		name: "unset variable",
		doc:  `{"mcpServers": {"x": {"command": "srv", "env": {"TOKEN": "${NOT_SET}"}}}}`,
		err:  "mcpServers.x.env.TOKEN: $NOT_SET is unset or empty",
	}, {
		name: "another client's variable",
		doc:  `{"servers": {"x": {"command": "srv", "args": ["${input:token}"]}}}`,
		err:  "servers.x.args.0: ${input:token} is not a variable bub-mcp expands",
	}, {
		name: "a name in both keys",
		doc:  `{"mcpServers": {"x": {"command": "a"}}, "servers": {"x": {"command": "b"}}}`,
		err:  `server "x" is in both mcpServers and servers`,
	}, {
		name: "a bad url does not show its value",
		doc:  `{"mcpServers": {"x": {"url": "ftp://${API_KEY}@host/"}}}`,
		err:  "mcpServers.x.url: not an http(s) URL",
	}, {
		name: "unknown type",
		doc:  `{"mcpServers": {"x": {"url": "http://h/", "type": "websocket"}}}`,
		err:  `mcpServers.x.type: unknown type "websocket"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "mcp.json")
			if err := os.WriteFile(file, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readMCPJSON(file, getenv)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one with %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "sk-secret") {
					t.Errorf("the error shows a variable's value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var servers []server
			for _, s := range got.servers {
				servers = append(servers, server{Name: s.name, Kind: s.kind(), Command: s.Command, URL: s.URL, Args: s.Args, Env: s.Env, Headers: s.Headers})
			}
			if diff := cmp.Diff(tc.want, servers); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.disabled, got.disabled); diff != "" {
				t.Errorf("disabled (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ignored, got.ignored); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
		})
	}
}
