// Package statekey finds the server's secret key: the one that seals the
// 2026-07-28 requestState (package mcpserver) and from which other sealed
// state derives its own keys (package upstream's credentials and login
// state, with HKDF). It is a leaf so that those packages share one source
// without linking each other.
package statekey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the key's file under $BUB_HOME when none is configured.
const FileName = "state.key"

// Configured is the configured key's text: $BUB_STATE_KEY, else [server]
// state_key; empty means the key under $BUB_HOME.
func Configured(getenv func(string) string, stateKey string) string {
	if v := getenv("BUB_STATE_KEY"); v != "" {
		return v
	}
	return stateKey
}

// Load returns the key: configured (from BUB_STATE_KEY or [server]
// state_key; at least 32 characters), else one generated once and kept in
// home/state.key with mode 0600. Replicas behind one load balancer must
// share it.
func Load(configured, home string) ([]byte, error) {
	if configured != "" {
		if len(configured) < 32 {
			return nil, errors.New("the requestState key (BUB_STATE_KEY or [server] state_key) must be at least 32 characters")
		}
		sum := sha256.Sum256([]byte(configured))
		return sum[:], nil
	}
	if home == "" {
		return Random()
	}
	path := filepath.Join(home, FileName)
	if b, err := os.ReadFile(path); err == nil {
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("%s is not a 64-digit hex key; delete it to make a new one", path)
		}
		return k, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	k, err := Random()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	// The key is written to a file of its own and linked into place, so
	// the key file appears whole or not at all: of processes starting at
	// once on a fresh home (two IDE windows), one links and the others
	// find its key. Creating the key file itself and then writing it let
	// another read it empty in between.
	tmp, err := os.CreateTemp(home, FileName+".*")
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(k) + "\n")
	if err := tmp.Chmod(0o600); werr == nil {
		werr = err
	}
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return nil, fmt.Errorf("writing %s: %w", path, werr)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return Load("", home)
	} else if err != nil {
		return nil, fmt.Errorf("creating %s: %w", path, err)
	}
	return k, nil
}

// Random is a fresh 32-byte key, for a process without a home.
func Random() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	return k, nil
}
