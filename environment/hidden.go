package environment

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// hiddenSet is what Options.Hidden asks for: roots that confined file
// operations must not reach, and the roots that stay reachable beneath
// them (the workspace, AllowPaths, mounted paths). A path is decided by
// its innermost root, as the sandbox's mounts decide it: $BUB_HOME is
// hidden, but code mode's stub directory inside it stays readable. On a
// tie the hidden root wins. The zero value hides nothing.
type hiddenSet struct {
	roots []string // symlink-free host paths
	open  []string // symlink-free host paths
}

// newHiddenSet resolves the hidden paths as NewLocal resolves
// AllowPaths ("~" expanded, relative to ws, symlinks followed where the
// path exists); open are the reachable roots, already resolved.
func newHiddenSet(paths []string, ws string, open []string) (hiddenSet, error) {
	var h hiddenSet
	for _, p := range paths {
		if p == "" {
			return hiddenSet{}, fmt.Errorf("environment: hidden path %q is empty", p)
		}
		x, err := hostPath(p, ws)
		if err != nil {
			return hiddenSet{}, err
		}
		real, err := realPath(x)
		if err != nil {
			return hiddenSet{}, fmt.Errorf("environment: hidden path %q: %w", p, err)
		}
		if !slices.Contains(h.roots, real) {
			h.roots = append(h.roots, real)
		}
	}
	if len(h.roots) > 0 {
		h.open = slices.Clone(open)
	}
	return h, nil
}

// beneath reports whether p is root or lies inside it.
func beneath(p, root string) bool {
	return root == "/" || p == root || len(p) > len(root) && p[:len(root)] == root && p[len(root)] == '/'
}

// covers returns the hidden root that the symlink-free host path real
// lies beneath, unless a reachable root inside that hidden root holds
// it.
func (h *hiddenSet) covers(real string) (string, bool) {
	if h == nil {
		return "", false
	}
next:
	for _, root := range h.roots {
		if !beneath(real, root) {
			continue
		}
		for _, o := range h.open {
			if len(o) > len(root) && beneath(o, root) && beneath(real, o) {
				continue next
			}
		}
		return root, true
	}
	return "", false
}

// check refuses the symlink-free host path real, named p by the caller,
// when it is hidden.
func (h *hiddenSet) check(p, real string) error {
	if root, ok := h.covers(real); ok {
		return hiddenError(p, root)
	}
	return nil
}

// checkFile refuses an opened file that is hidden. It asks the kernel
// where f really is, so a symlink swapped in after an earlier check on
// the path does not lead a file operation into a hidden root.
func (h *hiddenSet) checkFile(p string, f *os.File) error {
	if h == nil || len(h.roots) == 0 {
		return nil
	}
	real, err := fdPath(f)
	if err != nil {
		return fmt.Errorf("environment: locate %q: %w", p, err)
	}
	return h.check(p, real)
}

// hiddenError is the refusal of a path beneath a hidden root. It wraps
// ErrOutsideWorkspace: to a tool it is one more place outside the
// workspace, named so the model does not retry.
func hiddenError(p, root string) error {
	return &wrapError{
		msg: fmt.Sprintf("environment: path %q lies in %s, which no tool may reach", p, root),
		err: ErrOutsideWorkspace,
	}
}

// fdPath is where the kernel says the open file f is, from
// /proc/self/fd. It goes through SyscallConn rather than Fd, which
// would put a non-blocking FIFO into blocking mode.
func fdPath(f *os.File) (string, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	var p string
	var rerr error
	if err := sc.Control(func(fd uintptr) {
		p, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return "", err
	}
	if rerr != nil {
		return "", rerr
	}
	if !filepath.IsAbs(p) {
		// An anonymous file ("pipe:[…]"): nothing beneath a root.
		return "", &fs.PathError{Op: "locate", Path: f.Name(), Err: fs.ErrInvalid}
	}
	return p, nil
}
