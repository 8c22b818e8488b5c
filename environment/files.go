package environment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// binarySniffLen is how much of a file is searched for a NUL byte, the
// usual sign of a binary file (as git and grep do).
const binarySniffLen = 8 << 10

// maxSymlinkHops matches the kernel's limit before ELOOP.
const maxSymlinkHops = 40

// ResolvePath expands "~", joins relative paths to the workspace and
// cleans the result. When the environment is confined, a path whose real
// location (after "..", and symlinks in its existing part) is outside the
// workspace and AllowPaths, or beneath a hidden root
// (LocalOptions.Hidden), fails with an error wrapping
// ErrOutsideWorkspace. The returned path is the cleaned one, not the
// symlink-resolved one, so messages show what the caller asked for.
//
// Confinement is checked when ResolvePath runs; a symlink swapped in
// afterwards is not caught. It protects against mistakes, not attackers.
func (e *LocalEnvironment) ResolvePath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("environment: path %q contains a NUL byte", p)
	}
	x, err := expandHome(p)
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(x) {
		x = filepath.Clean(x)
	} else {
		x = filepath.Join(e.workspace, x)
	}
	if e.confine {
		real, err := realPath(x)
		if err != nil {
			return "", fmt.Errorf("environment: resolve %q: %w", p, err)
		}
		if !e.allowed(real) {
			return "", &wrapError{
				msg: fmt.Sprintf("environment: path %q resolves outside the workspace %s", p, e.workspace),
				err: ErrOutsideWorkspace,
			}
		}
		if err := e.hidden.check(p, real); err != nil {
			return "", err
		}
	}
	return x, nil
}

// allowed reports whether the symlink-free path real lies in one of the
// confinement roots.
func (e *LocalEnvironment) allowed(real string) bool {
	for _, root := range e.realRoots {
		if beneath(real, root) {
			return true
		}
	}
	return false
}

// checkWritable refuses, in a confined environment, a write whose real
// location lies beneath a read-only root (AllowPaths): code mode's stub
// directory is readable so run_code's model can read its stub, but a
// file planted there would be Python that later runs.
func (e *LocalEnvironment) checkWritable(p, path string) error {
	if !e.confine || len(e.readOnly) == 0 {
		return nil
	}
	real, err := realPath(path)
	if err != nil {
		return fmt.Errorf("environment: resolve %q: %w", p, err)
	}
	for _, root := range e.readOnly {
		if real == root || strings.HasPrefix(real, root+"/") {
			return &wrapError{
				msg: fmt.Sprintf("environment: path %q is read-only: %s may be read but not written by file tools", p, root),
				err: ErrReadOnly,
			}
		}
	}
	return nil
}

// hostPath is a configured root (AllowPaths, Hidden, the sandbox's
// mounts) as an absolute, cleaned host path: "~" expanded, a relative
// path joined to the workspace ws.
func hostPath(p, ws string) (string, error) {
	x, err := expandHome(p)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(x) {
		x = filepath.Join(ws, x)
	}
	return filepath.Clean(x), nil
}

// expandHome expands a leading "~" or "~user" as a POSIX shell (and
// Python's expanduser) does. An unknown user leaves the path unchanged.
func expandHome(p string) (string, error) {
	if p == "" || p[0] != '~' {
		return p, nil
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	var home string
	if name == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("environment: expand %q: %w", p, err)
		}
		home = h
	} else {
		u, err := user.Lookup(name)
		if err != nil || u.HomeDir == "" {
			return p, nil
		}
		home = u.HomeDir
	}
	return filepath.Join(home, rest), nil
}

// realPath resolves every symlink in the absolute, clean path p the way
// the kernel would when opening it. Once a component does not exist, the
// rest is taken lexically, so paths about to be created can be checked
// too; a dangling symlink is followed to its (missing) target, so it
// cannot smuggle a write outside.
func realPath(p string) (string, error) {
	rest := strings.Split(p, "/")
	resolved := "/"
	hops := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// resolved has no symlinks left, so ".." is its parent.
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if err != nil {
			// Missing, not a directory, or not searchable: the kernel
			// could not go further either, so nothing below can be
			// reached through a symlink.
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", fmt.Errorf("%s: %w", p, syscall.ELOOP)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}

// ReadText reads a UTF-8 text file. The errors say what is wrong in
// words a model can act on: the file is missing (wraps fs.ErrNotExist), a
// directory (ErrIsDir), binary (ErrBinary: a NUL byte in the first 8 KiB
// or invalid UTF-8) or larger than LocalOptions.MaxReadBytes
// (ErrTooLarge). Line endings are left as they are.
func (e *LocalEnvironment) ReadText(ctx context.Context, p string) (string, error) {
	if err := checkCtx(ctx); err != nil {
		return "", err
	}
	path, err := e.ResolvePath(p)
	if err != nil {
		return "", err
	}
	// Stat before Open: opening a FIFO would block until a writer comes.
	fi, err := os.Stat(path)
	if err != nil {
		return "", fileError(path, err)
	}
	if fi.IsDir() {
		return "", isDirError(path)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("environment: %s is not a regular file", path)
	}
	if e.maxRead > 0 && fi.Size() > e.maxRead {
		return "", tooLargeError(path, fmt.Sprintf("%d bytes", fi.Size()), e.maxRead)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fileError(path, err)
	}
	defer f.Close()
	return readText(f, path, e.maxRead)
}

// OpenFile opens a regular file for reading. See FileOpener.
func (e *LocalEnvironment) OpenFile(ctx context.Context, p string) (io.ReadCloser, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	path, err := e.ResolvePath(p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path) // before Open, as in ReadText: a FIFO would block
	if err != nil {
		return nil, fileError(path, err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	return f, nil
}

// checkRegular refuses what is not a regular file.
func checkRegular(path string, fi os.FileInfo) error {
	if fi.IsDir() {
		return isDirError(path)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("environment: %s is not a regular file", path)
	}
	return nil
}

// readText reads the open file f (named path in errors) as UTF-8 text of
// at most maxRead bytes (no limit when maxRead <= 0), with
// LocalEnvironment.ReadText's checks.
func readText(f *os.File, path string, maxRead int64) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", fileError(path, err)
	}
	if fi.IsDir() {
		return "", isDirError(path)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("environment: %s is not a regular file", path)
	}
	if maxRead > 0 && fi.Size() > maxRead {
		return "", tooLargeError(path, fmt.Sprintf("%d bytes", fi.Size()), maxRead)
	}
	var r io.Reader = f
	if maxRead > 0 {
		// Files under /proc report size 0; the cap must hold anyway.
		r = io.LimitReader(f, maxRead+1)
	}
	// Size the buffer from the Stat above, so reading does not regrow it.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(r); err != nil {
		return "", fmt.Errorf("environment: read %s: %w", path, err)
	}
	data := buf.Bytes()
	if maxRead > 0 && int64(len(data)) > maxRead {
		return "", tooLargeError(path, fmt.Sprintf("more than %d bytes", maxRead), maxRead)
	}
	if i := bytes.IndexByte(data[:min(len(data), binarySniffLen)], 0); i >= 0 {
		return "", &wrapError{
			msg: fmt.Sprintf("environment: %s is a binary file (NUL byte at offset %d), not text", path, i),
			err: ErrBinary,
		}
	}
	if i := invalidUTF8(data); i >= 0 {
		return "", &wrapError{
			msg: fmt.Sprintf("environment: %s is a binary file (invalid UTF-8 at offset %d), not text", path, i),
			err: ErrBinary,
		}
	}
	return string(data), nil
}

// WriteText writes content to the file, creating it and any missing
// parent directories, and replacing what was there. An existing file keeps
// its permissions.
func (e *LocalEnvironment) WriteText(ctx context.Context, p, content string) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	path, err := e.ResolvePath(p)
	if err != nil {
		return err
	}
	if err := e.checkWritable(p, path); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("environment: create parent directories of %s: %w", path, err)
	}
	// As os.WriteFile, without copying content to a []byte first (a
	// large file would be held twice).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		if errors.Is(err, syscall.EISDIR) {
			return isDirError(path)
		}
		return fmt.Errorf("environment: %w", err)
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("environment: writing %s: %w", path, err)
	}
	return nil
}

// fileError rewords the common failures of Stat and Open.
func fileError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &wrapError{msg: "environment: no such file: " + path, err: err}
	case errors.Is(err, syscall.ENOTDIR):
		return &wrapError{msg: "environment: no such file: " + path + " (a parent is not a directory)", err: err}
	}
	return fmt.Errorf("environment: %w", err)
}

func isDirError(path string) error {
	return &wrapError{msg: "environment: " + path + " is a directory", err: ErrIsDir}
}

func tooLargeError(path, size string, limit int64) error {
	return &wrapError{
		msg: fmt.Sprintf("environment: %s is too large to read (%s; the limit is %d bytes)", path, size, limit),
		err: ErrTooLarge,
	}
}

// invalidUTF8 returns the offset of the first byte that is not valid
// UTF-8, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// checkCtx rejects a nil context, which would otherwise panic deep inside
// a call, and one that is already done.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return errors.New("environment: nil context")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	return nil
}
