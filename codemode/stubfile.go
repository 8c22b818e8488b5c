package codemode

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StubPath returns where WriteStub stores content for a session:
// <home>/codemode/<sha256(workspace NUL session)[:16]>/tools-<sha256(content)[:12]>.pyi.
// The path changes only when the session or the stub content changes.
func StubPath(home, workspace, session, content string) string {
	sessionSum := sha256.Sum256([]byte(workspace + "\x00" + session))
	contentSum := sha256.Sum256([]byte(content))
	return filepath.Join(home, "codemode",
		hex.EncodeToString(sessionSum[:])[:16],
		"tools-"+hex.EncodeToString(contentSum[:])[:12]+".pyi")
}

// WriteStub stores content at StubPath(home, workspace, session, content) and
// returns that path. An existing file is left alone: the name is derived from
// the content. Otherwise the file (mode 0600, in a directory created 0700) is
// written to a temporary name and renamed into place, so readers never see a
// partial stub.
func WriteStub(home, workspace, session, content string) (string, error) {
	path := StubPath(home, workspace, session, content)
	if _, err := os.Lstat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tools-*.tmp")
	if err != nil {
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(content)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("codemode: write stub: %w", err)
	}
	return path, nil
}
