package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/internal/lockedfile"
	"github.com/spf13/cobra"
	"github.com/tailscale/hujson"
)

// workspaceMode is what install puts in a client's entry for the
// workspace when --workspace is not given.
type workspaceMode int

const (
	// wsCurrent bakes the current directory in: the client has no
	// project of its own to start bub-mcp in (Claude Desktop).
	wsCurrent workspaceMode = iota
	// wsServe leaves the workspace to serve, which then works in the
	// directory the client starts it in. For files every project of the
	// user shares (a baked-in directory would serve one project to all)
	// and for files checked into a project (no one's absolute path).
	wsServe
	// wsVariable writes the client's own variable for the open folder,
	// which the client expands when it starts bub-mcp.
	wsVariable
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
	// stdio and http build the entry for a local command or a URL with
	// the --header headers (nil when none).
	stdio func(command string, args []string) map[string]any
	http  func(url string, headers map[string]string) map[string]any
	// toml marks a TOML file (Codex); the others are JSON with comments.
	toml bool
	// workspace is the entry's workspace without --workspace; variable
	// is the client's name for the open folder (wsVariable).
	workspace workspaceMode
	variable  string
	// signIn tells the user how this client signs in to a --http server
	// that asks for OAuth (NAME is the entry's name).
	signIn string
}

// withHeaders adds the headers to an HTTP entry under key, if any.
func withHeaders(entry map[string]any, key string, headers map[string]string) map[string]any {
	if len(headers) > 0 {
		entry[key] = headers
	}
	return entry
}

// typedStdio and typedHTTP are the entries of clients that name the
// transport ("type": "stdio" / "http").
func typedStdio(c string, a []string) map[string]any {
	return map[string]any{"type": "stdio", "command": c, "args": a}
}

func typedHTTP(u string, h map[string]string) map[string]any {
	return withHeaders(map[string]any{"type": "http", "url": u}, "headers", h)
}

func plainStdio(c string, a []string) map[string]any { return map[string]any{"command": c, "args": a} }

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
		stdio: plainStdio,
		// Claude Desktop's file takes local commands only; a remote server
		// is added in its Connectors settings, or bridged by mcp-remote
		// (whose --header takes "Name:value").
		http: func(u string, h map[string]string) map[string]any {
			args := []string{"-y", "mcp-remote", u}
			for _, k := range slices.Sorted(maps.Keys(h)) {
				args = append(args, "--header", k+":"+h[k])
			}
			return map[string]any{"command": "npx", "args": args}
		},
		workspace: wsCurrent,
		signIn:    "mcp-remote opens your browser to sign in the first time Claude Desktop starts it; or add the URL in Claude Desktop under Settings \u2192 Connectors instead.",
	},
	"claude-code": {
		path:      func(env *Env, home, ws string) string { return filepath.Join(home, ".claude.json") },
		key:       "mcpServers",
		stdio:     typedStdio,
		http:      typedHTTP,
		workspace: wsServe,
		signIn:    claudeCodeSignIn,
	},
	"vscode": {
		path:      func(env *Env, home, ws string) string { return filepath.Join(ws, ".vscode", "mcp.json") },
		key:       "servers",
		stdio:     typedStdio,
		http:      typedHTTP,
		workspace: wsVariable,
		variable:  "${workspaceFolder}",
		signIn:    "VS Code asks you to sign in the first time it starts NAME.",
	},
	"cursor": {
		path:  func(env *Env, home, ws string) string { return filepath.Join(home, ".cursor", "mcp.json") },
		key:   "mcpServers",
		stdio: plainStdio,
		http: func(u string, h map[string]string) map[string]any {
			return withHeaders(map[string]any{"url": u}, "headers", h)
		},
		workspace: wsServe,
		signIn:    "Cursor shows a Login button for NAME in its MCP settings.",
	},
	"gemini-cli": {
		path:  func(env *Env, home, ws string) string { return filepath.Join(home, ".gemini", "settings.json") },
		key:   "mcpServers",
		stdio: plainStdio,
		http: func(u string, h map[string]string) map[string]any {
			return withHeaders(map[string]any{"httpUrl": u}, "headers", h)
		},
		workspace: wsServe,
		signIn:    "In Gemini CLI, run /mcp auth NAME.",
	},
	"codex": {
		path: func(env *Env, home, ws string) string {
			if d := env.Getenv("CODEX_HOME"); d != "" {
				return filepath.Join(d, "config.toml")
			}
			return filepath.Join(home, ".codex", "config.toml")
		},
		key:   "mcp_servers",
		stdio: plainStdio,
		http: func(u string, h map[string]string) map[string]any {
			return withHeaders(map[string]any{"url": u}, "http_headers", h)
		},
		toml:      true,
		workspace: wsServe,
		signIn:    "Run: codex mcp login NAME",
	},
}

// claudeCodeSignIn is how Claude Code signs in, in either scope.
const claudeCodeSignIn = "In Claude Code, run /mcp, pick NAME and choose Authenticate."

// claudeCodeProject is Claude Code's project scope (--scope project): the
// .mcp.json at the workspace's root, shared through the repository, so
// it holds no one's workspace path.
var claudeCodeProject = client{
	path:      func(env *Env, home, ws string) string { return filepath.Join(ws, ".mcp.json") },
	key:       "mcpServers",
	stdio:     typedStdio,
	http:      typedHTTP,
	workspace: wsServe,
	signIn:    claudeCodeSignIn,
}

func clientNames() []string {
	return slices.Sorted(maps.Keys(clients))
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
	scope     string
	headers   []string
}

// installCommand is `bub-mcp install CLIENT`.
func installCommand(env *Env) *cobra.Command {
	var o installOptions
	cmd := &cobra.Command{
		Use:   "install [flags] CLIENT",
		Short: "add bub-mcp to an MCP client's configuration (" + strings.Join(clientNames(), ", ") + ")",
		Long: "Add bub-mcp to an MCP client's configuration (" + strings.Join(clientNames(), ", ") + ").\n\n" +
			"Without --workspace, the files every project shares (Claude Code's user scope,\n" +
			"Cursor, Gemini CLI, Codex) and Claude Code's project .mcp.json get no workspace:\n" +
			"serve works in the directory the client starts it in. VS Code's entry gets\n" +
			"${workspaceFolder}; Claude Desktop's the current directory.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{"name one client: " + strings.Join(clientNames(), ", ")}
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return clientNames(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return install(env, args[0], o)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.print, "print", false, "print the configuration instead of writing it")
	fs.StringVar(&o.name, "name", "bub", "the server's name in the client (letters, digits, - and _)")
	fs.StringVar(&o.profile, "profile", "", "profile the client uses (serve --profile)")
	fs.StringVar(&o.workspace, "workspace", "", "workspace the tools work in (default: see above)")
	fs.StringVar(&o.http, "http", "", "point the client at a running serve --http at this `URL` (e.g. http://127.0.0.1:8080/mcp) instead of starting bub-mcp itself")
	fs.StringArrayVar(&o.headers, "header", nil, "`Name:value` header the client sends to the --http URL, e.g. \"Authorization:Bearer TOKEN\" (repeatable)")
	fs.StringVar(&o.scope, "scope", "", "claude-code only: user (~/.claude.json, the default) or project (.mcp.json in the workspace)")
	_ = cmd.RegisterFlagCompletionFunc("scope", cobra.FixedCompletions([]cobra.Completion{"user", "project"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// serverName is what --name may be: a bare key in every client's format.
var serverName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// parseHeaders reads the --header values; a name is an HTTP token.
func parseHeaders(raw []string) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(raw))
	for _, kv := range raw {
		k, v, ok := strings.Cut(kv, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n\"'()<>@,;:\\/[]?={}") || strings.ContainsAny(v, "\r\n") {
			return nil, &usageError{fmt.Sprintf("--header %q: want Name:value", kv)}
		}
		// An empty value, or an Authorization scheme without its
		// credentials, is what "Authorization:Bearer $TOKEN" gives with
		// TOKEN unset: the client would send it and be refused, and it
		// would not even offer an OAuth sign-in.
		if v == "" {
			return nil, &usageError{fmt.Sprintf("--header %q: the value is empty (an unset variable?)", kv)}
		}
		if strings.EqualFold(k, "Authorization") && !strings.ContainsAny(v, " \t") {
			return nil, &usageError{fmt.Sprintf("--header %q: want Authorization:SCHEME CREDENTIALS, e.g. \"Authorization:Bearer TOKEN\" (an unset variable?)", kv)}
		}
		h[k] = v
	}
	return h, nil
}

func install(env *Env, name string, o installOptions) error {
	cl, ok := clients[name]
	if !ok {
		return &usageError{fmt.Sprintf("unknown client %q (known: %s)", name, strings.Join(clientNames(), ", "))}
	}
	switch {
	case o.scope == "" || o.scope == "user" && name == "claude-code":
	case o.scope == "project" && name == "claude-code":
		cl = claudeCodeProject
	case name != "claude-code":
		return &usageError{fmt.Sprintf("--scope %q: only claude-code has scopes", o.scope)}
	default:
		return &usageError{fmt.Sprintf("--scope %q: want user or project", o.scope)}
	}
	if !serverName().MatchString(o.name) {
		return &usageError{fmt.Sprintf("--name %q: want a short name of letters, digits, - and _", o.name)}
	}
	headers, err := parseHeaders(o.headers)
	if err != nil {
		return err
	}
	if headers != nil && o.http == "" {
		return &usageError{"--header applies to --http entries only"}
	}
	home := env.Getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		home = h
	}
	// ws is where per-project files go (and, given, the entry's workspace).
	ws := config.ExpandHome(o.workspace)
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		ws = wd
	}
	ws, err = filepath.Abs(ws)
	if err != nil {
		return fmt.Errorf("%w", err)
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
		entry = cl.http(url, headers)
	} else {
		if err := checkWorkspace(ws, "--workspace"); err != nil {
			return err
		}
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("the path of this binary: %w", err)
		}
		if real, err := filepath.EvalSymlinks(bin); err == nil {
			bin = real
		}
		args := []string{"serve"}
		switch {
		case cl.workspace == wsVariable:
			args = append(args, "--workspace", cl.variable)
		case o.workspace != "" || cl.workspace == wsCurrent:
			args = append(args, "--workspace", ws)
		}
		if o.profile != "" {
			checkInstallProfile(env, o.profile)
			args = append(args, "--profile", o.profile)
		}
		entry = cl.stdio(bin, args)
	}
	path := cl.path(env, home, ws)
	if o.print {
		b, err := encodeEntry(cl, o.name, entry)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "# %s\n", path)
		if _, err = env.Stdout.Write(b); err != nil {
			return err
		}
		signInHint(env.Stderr, cl, o, headers)
		return nil
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
	signInHint(env.Stdout, cl, o, headers)
	return nil
}

// checkInstallProfile warns, on stderr, when the configuration does not
// define profile: serve --profile would refuse it at every start, and a
// client shows that only as a server that failed. It warns rather than
// refuses, so the entry may be written before the profile is.
func checkInstallProfile(env *Env, profile string) {
	cfg, home, err := loadConfig(env, "")
	if err != nil {
		fmt.Fprintf(env.Stderr, "Warning: could not check --profile %q: %v\n", profile, err)
		return
	}
	if _, ok := cfg.Profiles[profile]; ok {
		return
	}
	where := cfg.Path
	if where == "" {
		where = filepath.Join(home, "bub.toml") + " (absent)"
	}
	fmt.Fprintf(env.Stderr, "Warning: profile %q is not defined in %s (defined: %s): serve will refuse to start until [profiles.%s] is added.\n",
		profile, where, strings.Join(cfg.ProfileNames(), ", "), profile)
}

// signInHint tells the user, for a --http entry without an Authorization
// header, whether the server asks for an OAuth sign-in and how this
// client does it: the entry itself is all a client needs to sign in (it
// discovers OAuth from the server's 401), but when is not obvious.
func signInHint(w io.Writer, cl client, o installOptions, headers map[string]string) {
	if o.http == "" || cl.signIn == "" {
		return
	}
	for k := range headers {
		if strings.EqualFold(k, "Authorization") {
			return
		}
	}
	as, err := oauthServers(o.http)
	switch {
	case err != nil:
		fmt.Fprintf(w, "Could not check whether %s asks for a sign-in: %v\n", o.http, err)
	case len(as) > 0:
		fmt.Fprintf(w, "%s asks for an OAuth sign-in (at %s). %s\n", o.http, strings.Join(as, ", "),
			strings.ReplaceAll(cl.signIn, "NAME", o.name))
	}
}

// oauthServers reads the RFC 9728 metadata of the MCP endpoint at rawURL
// (the path-suffixed document, then the host's) and returns its
// authorization servers: none for a server without OAuth. It waits at
// most 5 s and reads at most 64 KiB.
func oauthServers(rawURL string) ([]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	paths := []string{"/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.EscapedPath(), "/")}
	if u.EscapedPath() != "" && u.EscapedPath() != "/" {
		paths = append(paths, "/.well-known/oauth-protected-resource")
	}
	reached := false
	for _, p := range paths {
		meta := url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, meta.String(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) { // it quotes the URL, which is said once
				err = ue.Err
			}
			return nil, fmt.Errorf("%s: %w", meta.Redacted(), err)
		}
		reached = true
		var doc struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		derr := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && derr == nil && len(doc.AuthorizationServers) > 0 {
			return doc.AuthorizationServers, nil
		}
	}
	if !reached {
		return nil, errors.New("no answer")
	}
	return nil, nil
}

// mergeConfig sets servers[name] = entry in the client's file, keeping
// everything else in it (comments and trailing commas included), after
// copying the old file to a timestamped backup (returned). The result is
// read back before it is written: a merge that would not hold exactly
// the entry fails instead. The new file replaces the old one atomically,
// with its permissions.
func mergeConfig(cl client, path, name string, entry map[string]any) (backup string, err error) {
	mode := fs.FileMode(0o600)
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	default:
		return "", fmt.Errorf("%w", err)
	}
	var b []byte
	if cl.toml {
		b, err = mergeTOML(old, cl.key, name, entry)
	} else {
		b, err = mergeJSONC(old, cl.key, name, entry)
	}
	if err != nil {
		return "", fmt.Errorf("%s %w", path, err)
	}
	if err := checkMerged(cl, b, name, entry); err != nil {
		return "", fmt.Errorf("%s: the merged file would not hold the entry (%v); add it by hand", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("%w", err)
	}
	if old != nil {
		if backup, err = writeBackup(path, old, mode); err != nil {
			return "", fmt.Errorf("backing up %s: %w", path, err)
		}
	}
	if err := lockedfile.Write(path, b, mode); err != nil {
		return "", err
	}
	return backup, nil
}

// writeBackup writes old to a new file named after path and the time,
// never over an existing one: two installs within one second (a script
// adding two entries) would otherwise leave only the second's backup, and
// the file as it was before the first would be gone.
func writeBackup(path string, old []byte, mode fs.FileMode) (string, error) {
	stamp := path + ".bak-" + time.Now().UTC().Format("20060102T150405Z")
	for i := 1; i <= 100; i++ {
		name := stamp
		if i > 1 {
			name = fmt.Sprintf("%s-%d", stamp, i)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(old)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		return name, nil
	}
	return "", fmt.Errorf("%s and 99 more backups of this second exist", stamp)
}

// checkMerged decodes the merged file as the client will and compares
// its servers[name] with entry, through their JSON forms.
func checkMerged(cl client, b []byte, name string, entry map[string]any) error {
	doc := map[string]any{}
	if cl.toml {
		if _, err := toml.Decode(string(b), &doc); err != nil {
			return err
		}
	} else {
		std, err := hujson.Standardize(slices.Clone(b))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(std, &doc); err != nil {
			return err
		}
	}
	servers, _ := doc[cl.key].(map[string]any)
	got, _ := json.Marshal(servers[name])
	want, _ := json.Marshal(entry)
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s.%s is %s", cl.key, name, got)
	}
	return nil
}

// encodeEntry is what --print shows: a file holding just the entry.
func encodeEntry(cl client, name string, entry map[string]any) ([]byte, error) {
	if cl.toml {
		return []byte(tomlTable(cl.key, name, entry)), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{cl.key: map[string]any{name: entry}}); err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	return buf.Bytes(), nil
}
