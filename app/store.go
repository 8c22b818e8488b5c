package app

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/sessions"
)

// replicaName names this process among replicas sharing a store:
// $BUB_REPLICA, else the host name, cut to the characters ids may hold.
func replicaName(getenv func(string) string) string {
	name := getenv("BUB_REPLICA")
	if name == "" {
		name, _ = os.Hostname()
	}
	name = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return -1
	}, name)
	if len(name) > 63 {
		name = name[:63]
	}
	if name == "" {
		name = "replica"
	}
	return name
}

// openStore loads the store module [store] kind picks (store.file by
// default), which decodes the table's other keys, and opens the session
// store with it. It returns the connection string of a PostgreSQL store,
// for the audit log that may share its database, else "".
func (a *App) openStore(ctx context.Context, o *Options) (pgDSN string, err error) {
	at, err := o.Config.ModuleTable("store")
	if err != nil {
		return "", err
	}
	m, err := a.LoadModule(ctx, sessions.StoreNamespace, "file", at)
	if err != nil {
		return "", err
	}
	sm, ok := m.(sessions.StoreModule)
	if !ok {
		return "", at.FailKind("module " + m.BubModule().ID + " opens no store (it lacks OpenBackend)")
	}
	kind := m.BubModule().Name()
	if kind != "file" && kind != sessions.MemoryKind {
		a.replica = replicaName(o.Getenv) // a shared store: name this replica
	}
	if kind == "postgres" {
		if c, ok := m.(interface{ ConnString() string }); ok {
			pgDSN = c.ConnString()
		}
	}
	so := &sessions.Options{CommitInterval: o.Config.Server.AuditCommitInterval.Duration, Logger: o.Logger, Store: kind, Module: sm}
	if a.store, err = sessions.Open(a.home, so); err != nil {
		return "", fmt.Errorf("app: %w", err)
	}
	return pgDSN, nil
}
