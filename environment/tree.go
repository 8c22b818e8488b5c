package environment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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
// root, so neither ".." nor a symlink planted in the tree leads out. Hidden
// roots inside it (Options.Hidden) are left out of listings and refused
// when opened, wherever a symlink leads from.
type rootTree struct {
	fs.FS
	root   *os.Root
	hidden *hiddenSet // nil: nothing hidden
}

// Open opens name without blocking on a FIFO planted in the tree (a
// sandboxed process could make one): it opens at once, and a reader sees
// from Stat that it is not a regular file.
func (t *rootTree) Open(name string) (fs.File, error) {
	f, err := t.open(name, os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err // not a nil *os.File in a non-nil fs.File
	}
	return f, nil
}

// open opens name with flag and refuses it when the file opened is
// hidden.
func (t *rootTree) open(name string, flag int) (*os.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := t.root.OpenFile(name, flag, 0)
	if err != nil {
		return nil, err
	}
	if err := t.hidden.checkFile(name, f); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f, nil
}

func (t *rootTree) ReadDir(name string) ([]fs.DirEntry, error) {
	if t.hidden == nil || len(t.hidden.roots) == 0 {
		return fs.ReadDir(t.FS, name)
	}
	f, err := t.open(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir, err := fdPath(f)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	list, err := f.ReadDir(-1)
	list = slices.DeleteFunc(list, func(d fs.DirEntry) bool {
		_, hidden := t.hidden.covers(filepath.Join(dir, d.Name()))
		return hidden
	})
	slices.SortFunc(list, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return list, err
}

func (t *rootTree) Stat(name string) (fs.FileInfo, error) {
	if t.hidden == nil || len(t.hidden.roots) == 0 {
		return fs.Stat(t.FS, name)
	}
	// O_PATH: metadata needs no read permission, and nothing is opened
	// for reading. os.Root opens a final symlink itself with O_PATH, so
	// one is opened again, followed, to stat what it leads to.
	f, err := t.open(name, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return fi, err
	}
	if f, err = t.open(name, os.O_RDONLY|syscall.O_NONBLOCK); err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

func (t *rootTree) Close() error { return t.root.Close() }

// openRootTree opens dir (on the host) as a Tree, refusing what is not a
// directory with the errors ReadText uses; hidden (nil for none) is left
// out of it.
func openRootTree(dir, shown string, hidden *hiddenSet) (Tree, error) {
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
	return &rootTree{FS: r.FS(), root: r, hidden: hidden}, nil
}

// OpenTree opens the host directory dir, after ResolvePath's checks; a
// confined environment leaves its hidden roots out of the tree.
func (e *LocalEnvironment) OpenTree(dir string) (Tree, error) {
	path, err := e.ResolvePath(dir)
	if err != nil {
		return nil, err
	}
	var hidden *hiddenSet
	if e.confine {
		hidden = &e.hidden
	}
	return openRootTree(path, path, hidden)
}

// OpenTree opens dir beneath the mounted root it lies in, so the tree
// holds exactly what a process in the sandbox would see there.
func (s *SandboxEnvironment) OpenTree(dir string) (Tree, error) {
	inside, hostRoot, rel, err := s.locate(dir)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return openRootTree(hostRoot, inside, &s.hidden)
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
	return &rootTree{FS: r.FS(), root: r, hidden: &s.hidden}, nil
}

var (
	_ TreeReader = (*LocalEnvironment)(nil)
	_ TreeReader = (*SandboxEnvironment)(nil)
)
