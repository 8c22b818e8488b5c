package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
)

// Skills over MCP, per SEP-2640 (extension io.modelcontextprotocol/skills):
// every file of a skill the caller may use is a resource
// skill://<name>/<path>; skills/list and skills/get give each skill's
// verbatim frontmatter and the SHA-256 digest of every file, so a host can
// verify what it loads and bind approvals to it. A caller may use the
// skills its View lets it load with the skill tool (directly or from
// run_code), from its workspace, confined as the tool is.
//
// resources/directory/read (SEP-2640's optional directoryRead) is not
// served: the capability declares no settings, so clients do not ask.

// ExtensionID is SEP-2640's identifier under capabilities.extensions.
const ExtensionID = "io.modelcontextprotocol/skills"

// Bounds on what one skill may hold to be served over MCP: its resources
// must list every file, so a skill over a bound is not served at all.
const (
	maxSkillFiles    = 512
	maxSkillFileSize = 16 << 20
	maxSkillBytes    = 64 << 20
	listPageSize     = 100
)

// uriPrefix starts every skill resource URI.
const uriPrefix = "skill://"

// Entry is a skill as skills/list and skills/get describe it.
type Entry struct {
	URI         string         `json:"uri"`
	Frontmatter map[string]any `json:"frontmatter"`
	Resources   []FileDigest   `json:"resources"`
}

// FileDigest is one file of a skill: its resource URI and the digest of
// its bytes, "sha256:" and 64 lowercase hex digits.
type FileDigest struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
}

// skillFile is a file of a skill on disk.
type skillFile struct {
	rel  string // slash-separated, relative to the skill's directory
	path string // absolute, symlinks resolved
}

// MCPExtensions serves the App's skills over MCP (SEP-2640).
func (m *Module) MCPExtensions() []mcpserver.Extension {
	return []mcpserver.Extension{{
		Capabilities: mcpserver.Capabilities{Extensions: map[string]any{ExtensionID: map[string]any{}}},
		Methods: map[string]mcpserver.MethodFunc{
			"skills/list": m.listMethod,
			"skills/get":  m.getMethod,
		},
		CallerResources: m.listResources,
		Templates: []mcpserver.ResourceTemplate{{
			URITemplate: uriPrefix + "{skill}/{+path}", Name: "skill-file",
			Description: "A file of a skill (SEP-2640); skill://<name>/SKILL.md is its instructions.",
			Read:        m.readResource,
		}},
	}}
}

// served returns the skills conn may use over MCP: none unless its View
// offers the skill tool, directly or in run_code.
func (m *Module) served(ctx context.Context, conn *providers.Connection) ([]Skill, error) {
	if m.app == nil {
		return nil, errors.New("skills: the module is not provisioned")
	}
	if err := m.app.Resolve(ctx, conn); err != nil {
		return nil, err
	}
	v, err := m.app.View(ctx, conn)
	if err != nil {
		return nil, err
	}
	if _, ok := v.Lookup(toolName); !ok {
		if _, ok := v.LookupCode(toolName); !ok {
			return nil, nil
		}
	}
	return m.For(conn), nil
}

// SkillURI is the resource URI of a skill's SKILL.md.
func SkillURI(name string) string { return uriPrefix + name + "/" + SkillFileName }

// listResources lists each SKILL.md the caller may read; supporting files
// are read through the template, as the entries' resources name them.
func (m *Module) listResources(ctx context.Context, conn *providers.Connection) []mcpserver.ResourceInfo {
	skills, err := m.served(ctx, conn)
	if err != nil {
		m.logger().WarnContext(ctx, "skills.mcp.list", "error", err)
		return nil
	}
	out := make([]mcpserver.ResourceInfo, 0, len(skills))
	for _, s := range skills {
		out = append(out, mcpserver.ResourceInfo{URI: SkillURI(s.Name), Name: s.Name, Description: s.Description, MIMEType: "text/markdown"})
	}
	return out
}

// listResult is skills/list's result.
type listResult struct {
	mcpserver.CacheableResult
	Skills     []Entry `json:"skills"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// listMethod answers skills/list, a page of listPageSize skills at a time;
// the cursor is the URI of the last skill of the page before. A skill that
// cannot be described (too large, unreadable) is left out and logged.
func (m *Module) listMethod(ctx context.Context, conn *providers.Connection, params json.RawMessage, modern bool) (any, error) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: "skills/list: params: " + err.Error()}
		}
	}
	skills, err := m.served(ctx, conn)
	if err != nil {
		return nil, err
	}
	start := 0
	if p.Cursor != nil {
		i := slices.IndexFunc(skills, func(s Skill) bool { return SkillURI(s.Name) == *p.Cursor })
		if i < 0 {
			return nil, &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: fmt.Sprintf("skills/list: invalid cursor %q", *p.Cursor)}
		}
		start = i + 1
	}
	res := listResult{Skills: []Entry{}}
	if modern {
		// Skills are files a user may edit at any time.
		res.SetCacheHints(0, mcpserver.CacheScopePrivate)
	}
	for i := start; i < len(skills); i++ {
		if len(res.Skills) == listPageSize {
			res.NextCursor = SkillURI(skills[i-1].Name)
			break
		}
		e, err := m.digests.describe(skills[i])
		if err != nil {
			m.logger().WarnContext(ctx, "skills.mcp.skip", "skill", skills[i].Name, "error", err)
			continue
		}
		res.Skills = append(res.Skills, e)
	}
	return res, nil
}

// getMethod answers skills/get: the entry of the skill whose SKILL.md URI
// params.uri is, or -32602 when the caller has no such skill.
func (m *Module) getMethod(ctx context.Context, conn *providers.Connection, params json.RawMessage, modern bool) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: "skills/get: params: " + err.Error()}
		}
	}
	if p.URI == "" {
		return nil, &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: "skills/get: params.uri is required (a skill's SKILL.md URI)"}
	}
	s, err := m.lookup(ctx, conn, p.URI)
	if err != nil {
		return nil, err
	}
	e, err := m.digests.describe(s)
	if err != nil {
		return nil, &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: "skills/get: " + err.Error()}
	}
	return struct {
		Skill Entry `json:"skill"`
	}{e}, nil
}

// lookup finds the caller's skill whose SKILL.md is at uri.
func (m *Module) lookup(ctx context.Context, conn *providers.Connection, uri string) (Skill, error) {
	name, ok := strings.CutPrefix(uri, uriPrefix)
	if ok {
		name, ok = strings.CutSuffix(name, "/"+SkillFileName)
	}
	if ok {
		skills, err := m.served(ctx, conn)
		if err != nil {
			return Skill{}, err
		}
		for _, s := range skills {
			if s.Name == name {
				return s, nil
			}
		}
	}
	return Skill{}, &mcpserver.MethodError{Code: mcpserver.CodeInvalidParams, Message: fmt.Sprintf("skills/get: %s is not a skill this server serves", uri)}
}

// describe builds s's entry: its frontmatter as written and a digest of
// every file, reading only the files that changed since they were last
// digested.
func (c *digestCache) describe(s Skill) (Entry, error) {
	files, err := skillFiles(s)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{URI: SkillURI(s.Name), Frontmatter: s.Frontmatter, Resources: make([]FileDigest, 0, len(files))}
	for _, f := range files {
		d, err := c.digest(f)
		if err != nil {
			return Entry{}, fmt.Errorf("skill %s: %w", s.Name, err)
		}
		e.Resources = append(e.Resources, FileDigest{URI: uriPrefix + s.Name + "/" + f.rel, Digest: d})
	}
	return e, nil
}

// maxDigests bounds the digests a Module remembers; past it, it forgets
// them all and reads the files again.
const maxDigests = 4096

// digestCache remembers file digests by path, size and modification
// time, so that listing skills does not read every file of every skill
// each time. The zero value is ready to use.
type digestCache struct {
	mu sync.Mutex
	m  map[fileStamp]string
}

// racyWindow is how old a file's modification time must be before its
// digest is remembered.
const racyWindow = 2 * time.Second

// fileStamp identifies a version of a file as cheaply as stat(2) can.
type fileStamp struct {
	path  string
	size  int64
	mtime int64
}

// digest is SEP-2640's digest of f, from the cache when the file's stamp
// has not changed.
func (c *digestCache) digest(f skillFile) (string, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return "", err
	}
	key := fileStamp{f.path, st.Size(), st.ModTime().UnixNano()}
	c.mu.Lock()
	d, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	if d, err = digest(f.path); err != nil {
		return "", err
	}
	if time.Since(st.ModTime()) < racyWindow {
		// A file written this recently may change again within its
		// timestamp's granularity, keeping its stamp: read it again
		// next time (git's "racily clean" rule).
		return d, nil
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxDigests {
		c.m = map[fileStamp]string{}
	}
	c.m[key] = d
	c.mu.Unlock()
	return d, nil
}

// skillFiles lists s's files in path order: regular files below its
// directory, symlinks followed only when they stay inside it. Dot files
// and directories (.git, .DS_Store) are not part of a skill.
func skillFiles(s Skill) ([]skillFile, error) {
	root := filepath.Dir(s.Location) // symlinks resolved
	var files []skillFile
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || !within(root, real) {
			return nil // a dangling link or one out of the skill is no file of it
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() {
			return nil
		}
		if st.Size() > maxSkillFileSize {
			return fmt.Errorf("skill %s: %s is larger than %d MiB", s.Name, p, maxSkillFileSize>>20)
		}
		if total += st.Size(); total > maxSkillBytes {
			return fmt.Errorf("skill %s holds more than %d MiB", s.Name, maxSkillBytes>>20)
		}
		if len(files) == maxSkillFiles {
			return fmt.Errorf("skill %s has more than %d files", s.Name, maxSkillFiles)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, skillFile{rel: filepath.ToSlash(rel), path: real})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// within reports whether p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// digest is SEP-2640's digest of the file at p.
func digest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxSkillFileSize+1)); err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// readResource serves resources/read of skill://<name>/<path>: a file of
// one of the caller's skills, text when it is UTF-8, else a blob.
func (m *Module) readResource(ctx context.Context, conn *providers.Connection, req mcpserver.ReadRequest) ([]mcpserver.ResourceContents, error) {
	uri := req.URI
	rest, _ := strings.CutPrefix(uri, uriPrefix)
	name, rel, ok := strings.Cut(rest, "/")
	if !ok || rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." {
		return nil, fmt.Errorf("%s: not a skill file URI (skill://<name>/<path>)", uri)
	}
	skills, err := m.served(ctx, conn)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(skills, func(s Skill) bool { return s.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("%s: no skill %q is served to this caller", uri, name)
	}
	files, err := skillFiles(skills[i])
	if err != nil {
		return nil, err
	}
	j := slices.IndexFunc(files, func(f skillFile) bool { return f.rel == rel })
	if j < 0 {
		return nil, fmt.Errorf("%s: skill %s has no file %s", uri, name, rel)
	}
	data, err := os.ReadFile(files[j].path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", uri, err)
	}
	mimeType := mimeOf(rel)
	if utf8.Valid(data) {
		return []mcpserver.ResourceContents{{URI: uri, MIMEType: mimeType, Text: string(data)}}, nil
	}
	return []mcpserver.ResourceContents{{URI: uri, MIMEType: mimeType, Blob: data}}, nil
}

// mimeOf is the MIME type of a skill file by its extension.
func mimeOf(rel string) string {
	switch ext := strings.ToLower(path.Ext(rel)); ext {
	case ".md", ".markdown":
		return "text/markdown"
	case "":
		return "text/plain"
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
		return "application/octet-stream"
	}
}

var _ mcpserver.Extender = (*Module)(nil)
