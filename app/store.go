package app

import (
	"os"
	"slices"
	"strings"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/sessions"
)

// storeConfig is the [store] table: where sessions (tapes, settings,
// spill chunks) are kept.
type storeConfig struct {
	// Kind is "file" (the default: files under $BUB_HOME) or a kind a
	// store package registered with sessions.Register ("postgres", from
	// sessions/pgstore, which the bub-mcp binary imports).
	Kind string `toml:"kind"`
	// DSN tells that store where its data lives (for "postgres", the
	// connection string); DSNEnv names a variable holding it instead
	// (keeps passwords out of the file).
	DSN    string `toml:"dsn"`
	DSNEnv string `toml:"dsn_env"`
	// PoolSize caps the store's connections; 0 means its default.
	PoolSize int `toml:"pool_size"`
}

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

// storeOptions decodes [store] into the session store's options. A kind
// no imported store package registered fails naming the kinds known.
func storeOptions(cfg *config.Config, getenv func(string) string, o *sessions.Options) error {
	var sc storeConfig
	if err := cfg.Decode("store", &sc); err != nil {
		return err
	}
	switch sc.Kind {
	case "", "file":
		if sc.DSN != "" || sc.DSNEnv != "" || sc.PoolSize != 0 {
			return cfg.Fail(`dsn, dsn_env and pool_size need kind = "postgres"`, "store", "kind")
		}
		return nil
	}
	if known := sessions.Backends(); !slices.Contains(known, sc.Kind) {
		for i, k := range known {
			known[i] = quote(k)
		}
		return cfg.Fail(`unknown store kind `+quote(sc.Kind)+` (known: `+strings.Join(known, ", ")+`; forgotten import of its store package?)`, "store", "kind")
	}
	if sc.PoolSize < 0 {
		return cfg.Fail("must be >= 0", "store", "pool_size")
	}
	dsn := sc.DSN
	switch {
	case sc.DSN != "" && sc.DSNEnv != "":
		return cfg.Fail("set dsn or dsn_env, not both", "store", "dsn")
	case sc.DSNEnv != "":
		if dsn = strings.TrimSpace(getenv(sc.DSNEnv)); dsn == "" {
			return cfg.Fail("environment variable "+sc.DSNEnv+" is empty or unset", "store", "dsn_env")
		}
	case dsn == "":
		return cfg.Fail(`kind = `+quote(sc.Kind)+` needs dsn or dsn_env`, "store", "kind")
	}
	o.Store, o.DSN, o.PoolSize = sc.Kind, dsn, sc.PoolSize
	return nil
}

func quote(s string) string { return `"` + s + `"` }
