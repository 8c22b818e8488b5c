package app

import (
	"path/filepath"
	"time"

	"github.com/bubbuild/bub-mcp/audit"
	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

// auditConfig is the [audit] table. Defaults live in package audit; the
// commit interval is [server] audit_commit_interval.
type auditConfig struct {
	// Enabled turns the audit log off when false; nil means on.
	Enabled      *bool `toml:"enabled"`
	MaxArgBytes  int   `toml:"max_arg_bytes"`
	MaxFileBytes int64 `toml:"max_file_bytes"`
	KeepFiles    int   `toml:"keep_files"`
	KeepDays     int   `toml:"keep_days"`
	Sync         bool  `toml:"sync"`
	// Store is "file" (the default, home/audit) or "postgres" (the
	// [store] database, one log for all replicas).
	Store string `toml:"store"`
}

// openAudit decodes [audit] and opens the log under home/audit (or in
// the [store] database, pgDSN), or returns nil when it is turned off.
func openAudit(cfg *config.Config, home, pgDSN string, o *Options) (*audit.Log, error) {
	var ac auditConfig
	if err := cfg.Decode("audit", &ac); err != nil {
		return nil, err
	}
	if ac.Enabled != nil && !*ac.Enabled {
		return nil, nil
	}
	switch {
	case ac.MaxArgBytes < 0:
		return nil, cfg.Fail("must be >= 0 (0 means the default, 4096)", "audit", "max_arg_bytes")
	case ac.MaxFileBytes < 0:
		return nil, cfg.Fail("must be >= 0 (0 means the default, 64 MiB)", "audit", "max_file_bytes")
	case ac.KeepFiles < -1:
		return nil, cfg.Fail("must be >= -1 (-1 keeps every file)", "audit", "keep_files")
	case ac.KeepDays < -1:
		return nil, cfg.Fail("must be >= -1 (-1 keeps files of any age)", "audit", "keep_days")
	}
	dsn := ""
	switch ac.Store {
	case "", "file":
	case "postgres":
		if pgDSN == "" {
			return nil, cfg.Fail(`store = "postgres" needs [store] kind = "postgres"`, "audit", "store")
		}
		dsn = pgDSN
	default:
		return nil, cfg.Fail(`unknown audit store "`+ac.Store+`" (known: "file", "postgres")`, "audit", "store")
	}
	return audit.Open(audit.Options{
		PostgresDSN: dsn,
		Dir:         filepath.Join(home, "audit"), MaxArgBytes: ac.MaxArgBytes, MaxFileBytes: ac.MaxFileBytes,
		KeepFiles: ac.KeepFiles, KeepDays: ac.KeepDays, Sync: ac.Sync,
		CommitInterval: cfg.Server.AuditCommitInterval.Duration, Logger: o.Logger,
	})
}

// record writes one call to the audit log, when there is one.
func (a *App) record(conn *providers.Connection, req *Request, tool string, tc *registry.ToolContext, start time.Time, res *registry.Result) {
	if a.audit == nil {
		return
	}
	r := audit.Record{
		Time: start, Principal: conn.Principal, PrincipalName: conn.PrincipalName, Profile: conn.Profile, Transport: conn.Transport,
		Session: conn.SessionKey, Mode: req.Mode.String(), Tool: tool, Args: req.Args,
		Outcome: "ok", Duration: res.Duration,
	}
	if conn.ClientName != "" {
		r.Client = conn.ClientName + "/" + conn.ClientVersion
	}
	if tc != nil {
		r.RunID = tc.RunID
	}
	if res.Duration == 0 {
		r.Duration = time.Since(start)
	}
	if res.Err != nil {
		r.Outcome, r.ErrorKind, r.Error = "error", string(res.Err.Kind), res.Err.Message
	}
	a.audit.Record(r)
}

// Audit writes a record that is not a tool call (an upstream tool's
// quarantine or approval) to the audit log, when there is one; a zero
// Time is now.
func (a *App) Audit(r audit.Record) {
	if a.audit == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	a.audit.Record(r)
}
