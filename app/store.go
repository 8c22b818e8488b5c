package app

import (
	"os"
	"strings"

	"github.com/bubbuild/bub-mcp/config"
	"github.com/bubbuild/bub-mcp/sessions"
)

// storeConfig is the [store] table: where sessions (tapes, settings,
// spill chunks) are kept.
type storeConfig struct {
	// Kind is "file" (the default: files under $BUB_HOME) or "postgres".
	Kind string `toml:"kind"`
	// DSN is the PostgreSQL connection string; DSNEnv names a variable
	// holding it instead (keeps passwords out of the file).
	DSN    string `toml:"dsn"`
	DSNEnv string `toml:"dsn_env"`
	// PoolSize caps the connections to PostgreSQL; 0 means pgx's default.
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

// storeOptions decodes [store] into the session store's options.
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
	case "postgres":
	default:
		return cfg.Fail(`unknown store kind `+quote(sc.Kind)+` (known: "file", "postgres")`, "store", "kind")
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
		return cfg.Fail(`kind = "postgres" needs dsn or dsn_env`, "store", "kind")
	}
	o.PostgresDSN, o.PostgresPoolSize = dsn, sc.PoolSize
	return nil
}

func quote(s string) string { return `"` + s + `"` }
