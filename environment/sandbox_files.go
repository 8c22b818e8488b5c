package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ResolvePath resolves p as a process in the sandbox would see it ("~" is
// its HOME, /tmp), cleaned; relative paths join the workspace. A path
// outside everything mounted for the sandbox's files (workspace,
// ReadWrite, ReadOnly, AllowPaths, /tmp) fails with ErrOutsideWorkspace,
// also through symlinks: the sandbox is always confined.
func (s *SandboxEnvironment) ResolvePath(p string) (string, error) {
	x, _, _, err := s.locate(p)
	return x, err
}

// locate resolves p and finds the mounted root it lies in: the cleaned
// inside path, the host directory of the root, and the path relative to
// it.
func (s *SandboxEnvironment) locate(p string) (inside, hostRoot, rel string, err error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", "", fmt.Errorf("environment: path %q contains a NUL byte", p)
	}
	x := p
	if x == "~" || strings.HasPrefix(x, "~/") {
		x = "/tmp" + x[1:]
	}
	if filepath.IsAbs(x) {
		x = filepath.Clean(x)
	} else {
		x = filepath.Join(s.host.workspace, x)
	}
	if ws := s.host.workspace; x == ws || strings.HasPrefix(x, ws+"/") {
		// The configured workspace may be a symlink to the mounted one.
		if real, err := filepath.EvalSymlinks(ws); err == nil {
			x = real + strings.TrimPrefix(x, ws)
		}
	}
	for _, root := range s.readRoots {
		if x == root || strings.HasPrefix(x, root+"/") {
			rel := strings.TrimPrefix(strings.TrimPrefix(x, root), "/")
			if rel == "" {
				rel = "."
			}
			h := root
			if root == "/tmp" {
				h = s.tmp
			}
			return x, h, rel, nil
		}
	}
	return "", "", "", &wrapError{
		msg: fmt.Sprintf("environment: path %q is outside the sandbox's workspace %s (and its other mounted paths)", p, s.host.workspace),
		err: ErrOutsideWorkspace,
	}
}

// openRoot opens the root p lies in; write asks for a writable one.
func (s *SandboxEnvironment) openRoot(p string, write bool) (*os.Root, string, string, error) {
	inside, hostRoot, rel, err := s.locate(p)
	if err != nil {
		return nil, "", "", err
	}
	if write {
		insideRoot := hostRoot
		if hostRoot == s.tmp {
			insideRoot = "/tmp"
		}
		if !s.writeable[insideRoot] {
			return nil, "", "", &wrapError{msg: fmt.Sprintf("environment: %s is read-only in the sandbox", inside), err: ErrReadOnly}
		}
	}
	r, err := os.OpenRoot(hostRoot)
	if err != nil {
		return nil, "", "", fmt.Errorf("environment: %w", err)
	}
	return r, inside, rel, nil
}

// escapeError rewords os.Root's refusal of a path that leaves its root.
func escapeError(p string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return &wrapError{
			msg: fmt.Sprintf("environment: path %q resolves outside the sandbox's mounted paths (through a symlink)", p),
			err: ErrOutsideWorkspace,
		}
	}
	return nil
}

// ReadText reads a UTF-8 text file beneath its mounted root, with the
// checks and errors of LocalEnvironment.ReadText.
func (s *SandboxEnvironment) ReadText(ctx context.Context, p string) (string, error) {
	if err := checkCtx(ctx); err != nil {
		return "", err
	}
	r, path, rel, err := s.openRoot(p, false)
	if err != nil {
		return "", err
	}
	defer r.Close()
	// O_NONBLOCK: a FIFO planted in the workspace must not block the
	// server; it is refused below as not a regular file.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if e := escapeError(p, err); e != nil {
			return "", e
		}
		return "", fileError(path, err)
	}
	defer f.Close()
	return readText(f, path, s.maxRead)
}

// OpenFile opens a regular file beneath its mounted root for reading. See
// FileOpener.
func (s *SandboxEnvironment) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	r, path, rel, err := s.openRoot(p, false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0) // O_NONBLOCK: as in ReadText
	if err != nil {
		if e := escapeError(p, err); e != nil {
			return nil, e
		}
		return nil, fileError(path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkRegular(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// WriteText writes content beneath a writable mounted root, creating
// parent directories; an existing file keeps its permissions.
func (s *SandboxEnvironment) WriteText(ctx context.Context, p, content string) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	r, path, rel, err := s.openRoot(p, true)
	if err != nil {
		return err
	}
	defer r.Close()
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			if e := escapeError(p, err); e != nil {
				return e
			}
			return fmt.Errorf("environment: create parent directories of %s: %w", path, err)
		}
	}
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if e := escapeError(p, err); e != nil {
			return e
		}
		if errors.Is(err, syscall.EISDIR) {
			return isDirError(path)
		}
		return fmt.Errorf("environment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("environment: %s is not a regular file", path)
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	if _, err := io.WriteString(f, content); err != nil {
		return fmt.Errorf("environment: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("environment: write %s: %w", path, err)
	}
	return nil
}

// readAllLimit reads r to its end, keeping at most max bytes.
func readAllLimit(r io.Reader, max int64) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, max))
	_, _ = io.Copy(io.Discard, r)
	return string(b), err
}
