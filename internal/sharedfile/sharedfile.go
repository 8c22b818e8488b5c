// Package sharedfile opens append-only files that several processes write
// at once: session tapes and the audit log under one $BUB_HOME. A writer
// holds an exclusive flock(2) while it appends, and every lock checks that
// the path still names the file it has open, so a file another process
// renamed away (a tape reset, an audit rotation) is let go and the new one
// opened instead.
package sharedfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// File is one shared append-only file. It is not safe for concurrent use:
// callers serialise their own goroutines (one mutex per file) and File
// serialises processes.
type File struct {
	path string
	f    *os.File
	id   os.FileInfo // f's identity, taken when it was opened
}

// New returns a File for path; nothing is opened until Lock.
func New(path string) *File { return &File{path: path} }

// Path is the file's path.
func (s *File) Path() string { return s.path }

// Lock opens the file if needed (creating it with mode 0600, and its
// directory with 0700), takes an exclusive lock and returns the open file,
// which is the one the path names at that moment, with its FileInfo.
// created reports that the file did not exist before. Call Unlock when
// done.
func (s *File) Lock() (f *os.File, fi os.FileInfo, created bool, err error) {
	for range 100 {
		if s.f == nil {
			if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
				return nil, nil, false, fmt.Errorf("create directory of %s: %w", s.path, err)
			}
			_, statErr := os.Stat(s.path)
			f, err := os.OpenFile(s.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return nil, nil, false, err
			}
			if errors.Is(statErr, fs.ErrNotExist) {
				created = true
				syncDir(filepath.Dir(s.path))
			}
			id, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, nil, false, err
			}
			s.f, s.id = f, id
		}
		if err := flock(s.f, syscall.LOCK_EX); err != nil {
			return nil, nil, false, fmt.Errorf("lock %s: %w", s.path, err)
		}
		fi, err := s.current()
		if err != nil {
			s.unlock()
			return nil, nil, false, err
		}
		if fi != nil {
			return s.f, fi, created, nil
		}
		s.unlock()
		s.f.Close()
		s.f = nil
	}
	return nil, nil, false, fmt.Errorf("lock %s: the file keeps being replaced", s.path)
}

// current returns the path's FileInfo when it still names the open file
// (one stat: a file's identity never changes, so f's is kept from its
// opening), else nil.
func (s *File) current() (os.FileInfo, error) {
	pst, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !os.SameFile(pst, s.id) {
		return nil, nil
	}
	return pst, nil
}

// Unlock releases the lock taken by Lock; the file stays open.
func (s *File) Unlock() { s.unlock() }

func (s *File) unlock() {
	if s.f != nil {
		_ = flock(s.f, syscall.LOCK_UN)
	}
}

// Close closes the open file, if any.
func (s *File) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Drop closes the open file so the next Lock opens whatever the path names
// then; for the process that itself renamed or removed the file.
func (s *File) Drop() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// SyncDir fsyncs a directory so names created or renamed in it are
// durable. Failures are ignored: some filesystems cannot sync directories.
func SyncDir(dir string) { syncDir(dir) }

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
