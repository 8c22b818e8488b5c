package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ResolvePath resolves p as a process in the sandbox would see it ("~" is
// its HOME, /tmp), cleaned; relative paths join the workspace. A path
// outside everything mounted for the sandbox's files (workspace,
// ReadWrite, ReadOnly, AllowPaths, /tmp) or beneath a hidden root
// (SandboxOptions.Hidden) fails with ErrOutsideWorkspace, also through
// symlinks: the sandbox is always confined.
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
			// Where the path leads on the host, for the hidden roots;
			// files opened are checked again (checkFile), which a
			// symlink swapped in meanwhile cannot escape.
			if len(s.hidden.roots) > 0 {
				real, err := realPath(filepath.Join(h, rel))
				if err != nil {
					return "", "", "", fmt.Errorf("environment: resolve %q: %w", p, err)
				}
				if err := s.hidden.check(p, real); err != nil {
					return "", "", "", err
				}
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
	if err := s.hidden.checkFile(p, f); err != nil {
		return "", err
	}
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
	err = s.hidden.checkFile(p, f)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
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
	f, err := s.openWrite(r, p, rel)
	if err != nil {
		if e := escapeError(p, err); e != nil {
			return e
		}
		if errors.Is(err, syscall.EISDIR) {
			return isDirError(path)
		}
		if errors.Is(err, ErrOutsideWorkspace) {
			return err
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

// maxCreateTries bounds openWrite's retries when a file appears between
// its open and its creation (only a racing process does that).
const maxCreateTries = 3

// openWrite opens rel beneath r for writing, creating it if missing,
// without truncating, and refuses a file in a hidden root even when a
// process swaps a symlink in while it works: an existing file is checked
// once open, before anything is written; a new one (at the end of a
// dangling symlink, if rel is one) is created with O_EXCL|O_NOFOLLOW in
// a directory checked once open, so it is made exactly there.
func (s *SandboxEnvironment) openWrite(r *os.Root, p, rel string) (*os.File, error) {
	const flag = os.O_WRONLY | syscall.O_NONBLOCK
	if len(s.hidden.roots) == 0 {
		return r.OpenFile(rel, flag|os.O_CREATE, 0o644)
	}
	for range maxCreateTries {
		f, err := r.OpenFile(rel, flag, 0)
		if err == nil {
			if err := s.hidden.checkFile(p, f); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		target, err := danglingTarget(r, rel)
		if err != nil {
			return nil, err
		}
		dir, err := r.OpenFile(filepath.Dir(target), os.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			return nil, err
		}
		f, err = createIn(dir, filepath.Base(target), p, &s.hidden)
		dir.Close()
		if errors.Is(err, fs.ErrExist) {
			continue // made meanwhile: open it as an existing file
		}
		return f, err
	}
	return nil, fmt.Errorf("%s keeps appearing and disappearing: %w", p, fs.ErrExist)
}

// danglingTarget follows rel, beneath r, through the symlinks at its end
// to the name that does not exist, as open with O_CREAT would; an
// absolute link target leaves the root, as os.Root has it.
func danglingTarget(r *os.Root, rel string) (string, error) {
	for range maxSymlinkHops {
		fi, err := r.Lstat(rel)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return rel, nil
		}
		link, err := r.Readlink(rel)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(link) {
			return "", &fs.PathError{Op: "openat", Path: rel, Err: errors.New("path escapes from parent")}
		}
		rel = filepath.Join(filepath.Dir(rel), link)
	}
	return "", &fs.PathError{Op: "openat", Path: rel, Err: syscall.ELOOP}
}

// createIn creates the new file name in the open directory dir, after
// refusing dir if it is hidden. O_NOFOLLOW with O_EXCL: a symlink of that
// name is not followed (the creation fails with EEXIST).
func createIn(dir *os.File, name, p string, hidden *hiddenSet) (*os.File, error) {
	if err := hidden.checkFile(p, dir); err != nil {
		return nil, err
	}
	sc, err := dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var oerr error
	if err := sc.Control(func(dfd uintptr) {
		fd, oerr = unix.Openat(int(dfd), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	}); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, &fs.PathError{Op: "create", Path: p, Err: oerr}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name)), nil
}

// readAllLimit reads r to its end, keeping at most max bytes.
func readAllLimit(r io.Reader, max int64) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, max))
	_, _ = io.Copy(io.Discard, r)
	return string(b), err
}
