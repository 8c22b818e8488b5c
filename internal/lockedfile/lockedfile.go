// Package lockedfile writes the small files under $BUB_HOME that several
// processes rewrite (a serving process and the CLI, or replicas on one
// machine): credentials, pins, the OAuth front's grants, key rings, code
// mode's stubs. A write replaces the file whole, through a temporary file
// and a rename, so a reader never sees half of one; Lock serialises the
// read-modify-write cycles of processes that share a file. It is
// cmd/go/internal/lockedfile's idea, cut to what bub-mcp needs.
package lockedfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Write replaces path with data, file mode perm: data goes to a temporary
// file in the same directory, which is synced and renamed over path, so a
// crash leaves the old file or the new one, never a mix or an empty file.
// Missing parent directories are created private (0700), like the rest of
// $BUB_HOME; a caller that wants another mode creates them first.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// lockPoll is how often Lock tries again for a lock another process holds
// when ctx can end (flock(2) itself cannot be interrupted by a context).
const lockPoll = 10 * time.Millisecond

// Lock takes an exclusive flock(2) on path, creating it (mode 0600, its
// directory 0700) if needed, and returns the function that releases it.
// The lock file is not the data file: a data file is replaced by Write's
// rename, and a lock on the replaced file would lock nothing. With a ctx
// that can end, Lock tries until ctx ends; otherwise it blocks.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if ctx.Done() != nil {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
			case <-time.After(lockPoll):
			}
		default:
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
}
