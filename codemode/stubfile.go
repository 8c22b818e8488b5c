package codemode

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// StubPath returns where the stub with content lives for a session:
// <home>/codemode/<sha256(workspace NUL session)[:16]>/tools-<sha256(content)[:12]>.pyi.
// The path changes only when the session or the stub content changes, so
// an existing file never needs rewriting and a model that read the stub
// once knows it is still current while the path stays the same.
func StubPath(home, workspace, session, content string) string {
	sessionSum := sha256.Sum256([]byte(workspace + "\x00" + session))
	contentSum := sha256.Sum256([]byte(content))
	return filepath.Join(home, "codemode",
		hex.EncodeToString(sessionSum[:])[:16],
		"tools-"+hex.EncodeToString(contentSum[:])[:12]+".pyi")
}
