package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// client is an MCP client whose configuration `bub-mcp install` writes:
// where the file is and how an entry for bub-mcp looks in it.
type client struct {
	// path returns the configuration file; home is the user's home
	// directory, ws the workspace (for per-project files).
	path func(env *Env, home, ws string) string
	// key is the table of servers in the file ("mcpServers", "servers",
	// "mcp_servers").
	key string
	// stdio and http build the entry for a local command or a URL.
	stdio func(command string, args []string) map[string]any
	http  func(url string) map[string]any
	// toml marks a TOML file (Codex); the others are JSON.
	toml bool
}

// clients are the MCP clients install knows, by the name it takes.
var clients = map[string]client{
	"claude-desktop": {
		path: func(env *Env, home, ws string) string {
			switch runtime.GOOS {
			case "darwin":
				return filepath.Join(home, "Library", "Application Support", "Claude", "claude_desktop_config.json")
			case "windows":
				return filepath.Join(env.Getenv("APPDATA"), "Claude", "claude_desktop_config.json")
			}
			return filepath.Join(configHome(env, home), "Claude", "claude_desktop_config.json")
		},
		key:   "mcpServers",
		stdio: func(c string, a []string) map[string]any { return map[string]any{"command": c, "args": a} },
		// Claude Desktop's file takes local commands only; a remote server
		// is added in its Connectors settings, or bridged by mcp-remote.
		http: func(u string) map[string]any {
			return map[string]any{"command": "npx", "args": []string{"-y", "mcp-remote", u}}
		},
	},
	"claude-code": {
		path: func(env *Env, home, ws string) string { return filepath.Join(home, ".claude.json") },
		key:  "mcpServers",
		stdio: func(c string, a []string) map[string]any {
			return map[string]any{"type": "stdio", "command": c, "args": a}
		},
		http: func(u string) map[string]any { return map[string]any{"type": "http", "url": u} },
	},
	"vscode": {
		path: func(env *Env, home, ws string) string { return filepath.Join(ws, ".vscode", "mcp.json") },
		key:  "servers",
		stdio: func(c string, a []string) map[string]any {
			return map[string]any{"type": "stdio", "command": c, "args": a}
		},
		http: func(u string) map[string]any { return map[string]any{"type": "http", "url": u} },
	},
	"cursor": {
		path:  func(env *Env, home, ws string) string { return filepath.Join(home, ".cursor", "mcp.json") },
		key:   "mcpServers",
		stdio: func(c string, a []string) map[string]any { return map[string]any{"command": c, "args": a} },
		http:  func(u string) map[string]any { return map[string]any{"url": u} },
	},
	"gemini-cli": {
		path:  func(env *Env, home, ws string) string { return filepath.Join(home, ".gemini", "settings.json") },
		key:   "mcpServers",
		stdio: func(c string, a []string) map[string]any { return map[string]any{"command": c, "args": a} },
		http:  func(u string) map[string]any { return map[string]any{"httpUrl": u} },
	},
	"codex": {
		path: func(env *Env, home, ws string) string {
			if d := env.Getenv("CODEX_HOME"); d != "" {
				return filepath.Join(d, "config.toml")
			}
			return filepath.Join(home, ".codex", "config.toml")
		},
		key:   "mcp_servers",
		stdio: func(c string, a []string) map[string]any { return map[string]any{"command": c, "args": a} },
		http:  func(u string) map[string]any { return map[string]any{"url": u} },
		toml:  true,
	},
}

func clientNames() []string {
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func configHome(env *Env, home string) string {
	if d := env.Getenv("XDG_CONFIG_HOME"); d != "" {
		return d
	}
	return filepath.Join(home, ".config")
}

type installOptions struct {
	print     bool
	name      string
	profile   string
	workspace string
	http      string
}

func init() {
	var o installOptions
	register(&Command{
		Name:  "install",
		Usage: "[--print] [--name bub] [--profile P] [--workspace DIR] [--http URL] CLIENT",
		Short: "add bub-mcp to an MCP client's configuration (" + strings.Join(clientNames(), ", ") + ")",
		Flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&o.print, "print", false, "print the configuration instead of writing it")
			fs.StringVar(&o.name, "name", "bub", "the server's name in the client")
			fs.StringVar(&o.profile, "profile", "", "profile the client uses (serve --profile)")
			fs.StringVar(&o.workspace, "workspace", "", "workspace the tools work in (default: the current directory)")
			fs.StringVar(&o.http, "http", "", "point the client at a running `bub-mcp serve --http` at this URL (e.g. http://127.0.0.1:8080/mcp) instead of starting bub-mcp itself")
		},
		Run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) != 1 {
				return &usageError{"name one client: " + strings.Join(clientNames(), ", ")}
			}
			return install(env, args[0], o)
		},
	})
}

func install(env *Env, name string, o installOptions) error {
	cl, ok := clients[name]
	if !ok {
		return &usageError{fmt.Sprintf("unknown client %q (known: %s)", name, strings.Join(clientNames(), ", "))}
	}
	if o.name == "" || strings.ContainsAny(o.name, " \t\n.\"'") {
		return &usageError{fmt.Sprintf("--name %q: want a short name without spaces, dots or quotes", o.name)}
	}
	home := env.Getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("install: %w", err)
		}
		home = h
	}
	ws := o.workspace
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("install: %w", err)
		}
		ws = wd
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	var entry map[string]any
	if o.http != "" {
		if !strings.HasPrefix(o.http, "http://") && !strings.HasPrefix(o.http, "https://") {
			return &usageError{fmt.Sprintf("--http %q: want a URL such as http://127.0.0.1:8080/mcp", o.http)}
		}
		url := o.http
		if o.profile != "" && !strings.Contains(url, "/p/") {
			url = strings.TrimSuffix(url, "/") + "/p/" + o.profile
		}
		entry = cl.http(url)
	} else {
		if err := checkWorkspace(ws, "--workspace"); err != nil {
			return err
		}
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("install: the path of this binary: %w", err)
		}
		if real, err := filepath.EvalSymlinks(bin); err == nil {
			bin = real
		}
		args := []string{"serve", "--workspace", ws}
		if o.profile != "" {
			args = append(args, "--profile", o.profile)
		}
		entry = cl.stdio(bin, args)
	}
	path := cl.path(env, home, ws)
	if o.print {
		b, err := encodeConfig(cl, map[string]any{cl.key: map[string]any{o.name: entry}})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "# %s\n", path)
		_, err = env.Stdout.Write(b)
		return err
	}
	backup, err := mergeConfig(cl, path, o.name, entry)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Added %q to %s for %s.\n", o.name, path, name)
	if backup != "" {
		fmt.Fprintf(env.Stdout, "The previous file is saved as %s.\n", backup)
	}
	fmt.Fprintf(env.Stdout, "Restart %s to load it.\n", name)
	return nil
}

// mergeConfig sets servers[name] = entry in the client's file, keeping
// everything else in it, after copying the old file to a timestamped
// backup (returned). The new file replaces the old one atomically, with
// its permissions.
func mergeConfig(cl client, path, name string, entry map[string]any) (backup string, err error) {
	doc := map[string]any{}
	mode := fs.FileMode(0o600)
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
		if len(bytes.TrimSpace(old)) > 0 {
			if err := decodeConfig(cl, old, &doc); err != nil {
				return "", fmt.Errorf("install: %s is not valid %s (fix or move it, then run install again): %w", path, format(cl), err)
			}
		}
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	default:
		return "", fmt.Errorf("install: %w", err)
	}
	servers, ok := doc[cl.key].(map[string]any)
	if !ok {
		if doc[cl.key] != nil {
			return "", fmt.Errorf("install: %s: %q is not a table of servers", path, cl.key)
		}
		servers = map[string]any{}
	}
	servers[name] = entry
	doc[cl.key] = servers
	b, err := encodeConfig(cl, doc)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if old != nil {
		backup = path + ".bak-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.WriteFile(backup, old, mode); err != nil {
			return "", fmt.Errorf("install: backing up %s: %w", path, err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	return backup, nil
}

func format(cl client) string {
	if cl.toml {
		return "TOML"
	}
	return "JSON"
}

// decodeConfig reads a client's file; JSON numbers stay exact.
func decodeConfig(cl client, b []byte, doc *map[string]any) error {
	if cl.toml {
		_, err := toml.Decode(string(b), doc)
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(stripJSONComments(b)))
	dec.UseNumber()
	return dec.Decode(doc)
}

func encodeConfig(cl client, doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	if cl.toml {
		enc := toml.NewEncoder(&buf)
		enc.Indent = ""
		if err := enc.Encode(doc); err != nil {
			return nil, fmt.Errorf("install: %w", err)
		}
		return buf.Bytes(), nil
	}
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	return buf.Bytes(), nil
}

// stripJSONComments removes // and /* */ comments outside strings, which
// VS Code's mcp.json (JSONC) may hold; they are not kept on rewrite.
func stripJSONComments(b []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			out = append(out, c)
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
		default:
			out = append(out, c)
		}
	}
	return out
}
