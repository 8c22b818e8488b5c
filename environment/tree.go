package environment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// TreeReader is implemented by environments whose directory trees the
// server can list and read itself, without spawning a process: file
// search tools (fs.grep, fs.glob) walk through it. It is optional, so an
// environment that can only spawn processes need not provide it.
type TreeReader interface {
	// OpenTree returns a read-only view of the directory dir, a path as
	// ResolvePath returns it (ResolvePath's confinement applies). Names
	// in the tree are slash-separated and relative to dir. Symlinks are
	// reported as symlinks by ReadDir; opening one that leads outside
	// dir fails, so a walk that does not follow them stays inside.
	OpenTree(dir string) (Tree, error)
}

// Tree is a directory opened with TreeReader.OpenTree. Close it when
// done; it is not valid afterwards.
type Tree interface {
	fs.ReadDirFS
	fs.StatFS
	Close() error
}

// rootTree is a Tree over an *os.Root: every name is resolved beneath the
// root, so neither ".." nor a symlink planted in the tree leads out.
type rootTree struct {
	fs.FS
	root *os.Root
}

// Open opens name without blocking on a FIFO planted in the tree (a
// sandboxed process could make one): it opens at once, and a reader sees
// from Stat that it is not a regular file.
func (t *rootTree) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (t *rootTree) ReadDir(name string) ([]fs.DirEntry, error) {
	return fs.ReadDir(t.FS, name)
}

func (t *rootTree) Stat(name string) (fs.FileInfo, error) {
	return fs.Stat(t.FS, name)
}

func (t *rootTree) Close() error { return t.root.Close() }

// openRootTree opens dir (on the host) as a Tree, refusing what is not a
// directory with the errors ReadText uses.
func openRootTree(dir, shown string) (Tree, error) {
	// Stat first: os.OpenRoot opens without O_DIRECTORY or O_NONBLOCK,
	// so a FIFO would block it until a writer comes.
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("environment: %s is not a directory", shown)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &wrapError{msg: "environment: no such directory: " + shown, err: err}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("environment: %s is not a directory", shown)
		}
		return nil, fmt.Errorf("environment: open %s: %w", shown, err)
	}
	return &rootTree{FS: r.FS(), root: r}, nil
}

// OpenTree opens the host directory dir, after ResolvePath's checks.
func (e *LocalEnvironment) OpenTree(dir string) (Tree, error) {
	path, err := e.ResolvePath(dir)
	if err != nil {
		return nil, err
	}
	return openRootTree(path, path)
}

// OpenTree opens dir beneath the mounted root it lies in, so the tree
// holds exactly what a process in the sandbox would see there.
func (s *SandboxEnvironment) OpenTree(dir string) (Tree, error) {
	inside, hostRoot, rel, err := s.locate(dir)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return openRootTree(hostRoot, inside)
	}
	parent, err := os.OpenRoot(hostRoot)
	if err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	defer parent.Close()
	// As in openRootTree: a FIFO must not block OpenRoot. A sandboxed
	// process swapping one in after this check could still stall the
	// call; confinement, not that, is what os.Root guarantees.
	if fi, err := parent.Stat(filepath.ToSlash(rel)); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("environment: %s is not a directory", inside)
	}
	r, err := parent.OpenRoot(filepath.ToSlash(rel))
	if err != nil {
		if e := escapeError(dir, err); e != nil {
			return nil, e
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &wrapError{msg: "environment: no such directory: " + inside, err: err}
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("environment: %s is not a directory", inside)
		}
		return nil, fmt.Errorf("environment: open %s: %w", inside, err)
	}
	return &rootTree{FS: r.FS(), root: r}, nil
}

var (
	_ TreeReader = (*LocalEnvironment)(nil)
	_ TreeReader = (*SandboxEnvironment)(nil)
)
