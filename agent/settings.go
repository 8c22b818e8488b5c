package agent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bubbuild/bub-mcp/agent/command"
	"github.com/bubbuild/bub-mcp/agent/model"
)

// Config is the [agent] table of bub.toml, which the agent module decodes;
// LoadSettings lets BUB_* variables override it. A zero number means the
// setting's default (see Settings); the module refuses negative ones.
type Config struct {
	// Model is "provider:model".
	Model string `toml:"model"`
	// APIBase overrides every provider's base URL.
	APIBase string `toml:"api_base"`
	// APIKeyEnv names the variable holding the key for every provider
	// without its own, so the key itself stays out of the file.
	APIKeyEnv string `toml:"api_key_env"`
	// MaxSteps bounds a turn's model calls.
	MaxSteps int `toml:"max_steps"`
	// MaxTokens caps each reply.
	MaxTokens int `toml:"max_tokens"`
	// TimeoutSeconds bounds each model call attempt.
	TimeoutSeconds int `toml:"timeout_seconds"`
	// CommandPrefix starts a comma command (Bub's command_prefix).
	CommandPrefix string `toml:"command_prefix"`
}

// Settings are the agent's model settings: the [agent] table of bub.toml
// overridden by BUB_* environment variables.
type Settings struct {
	// Model is "provider:model"; empty means none is configured.
	Model string
	// APIKey is the key for every provider without its own
	// (BUB_API_KEY, or the variable [agent] api_key_env names).
	APIKey string
	// APIBase overrides every provider's base URL (BUB_API_BASE,
	// [agent] api_base).
	APIBase string
	// MaxSteps bounds a turn's model calls (BUB_MAX_STEPS, default 50).
	MaxSteps int
	// MaxTokens caps each reply (BUB_MAX_TOKENS, default 16384).
	MaxTokens int
	// Timeout bounds each model call attempt (BUB_MODEL_TIMEOUT_SECONDS,
	// default 120 s).
	Timeout time.Duration
	// CommandPrefix starts a comma command: BUB_COMMAND_PREFIX, [agent]
	// command_prefix, default ",". It is never empty and has no spaces.
	CommandPrefix string
	// Getenv finds BUB_<PROVIDER>_API_KEY / _API_BASE and the providers'
	// conventional <PROVIDER>_API_KEY; nil reads nothing.
	Getenv func(string) string
}

// Defaults used when neither bub.toml nor the environment sets a value.
const (
	DefaultMaxSteps = 50
	DefaultTimeout  = 120 * time.Second
)

// LoadSettings reads the [agent] table and the environment: BUB_MODEL,
// BUB_API_KEY, BUB_API_BASE, BUB_MAX_STEPS, BUB_MAX_TOKENS and
// BUB_MODEL_TIMEOUT_SECONDS win over bub.toml.
func LoadSettings(c Config, getenv func(string) string) (Settings, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	s := Settings{Model: c.Model, APIBase: c.APIBase, MaxSteps: c.MaxSteps, MaxTokens: c.MaxTokens,
		Timeout: time.Duration(c.TimeoutSeconds) * time.Second, CommandPrefix: c.CommandPrefix, Getenv: getenv}
	if err := checkPrefix(c.CommandPrefix); err != nil {
		return Settings{}, fmt.Errorf("agent: [agent] command_prefix: %w", err)
	}
	if v := getenv("BUB_COMMAND_PREFIX"); v != "" {
		if err := checkPrefix(v); err != nil {
			return Settings{}, fmt.Errorf("agent: BUB_COMMAND_PREFIX=%q: %w", v, err)
		}
		s.CommandPrefix = v
	}
	if c.APIKeyEnv != "" {
		s.APIKey = getenv(c.APIKeyEnv)
	}
	if v := strings.TrimSpace(getenv("BUB_MODEL")); v != "" {
		s.Model = v
	}
	if v := getenv("BUB_API_KEY"); v != "" {
		s.APIKey = v
	}
	if v := getenv("BUB_API_BASE"); v != "" {
		s.APIBase = v
	}
	for _, e := range []struct {
		name string
		dst  *int
	}{{"BUB_MAX_STEPS", &s.MaxSteps}, {"BUB_MAX_TOKENS", &s.MaxTokens}} {
		if v := getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return Settings{}, fmt.Errorf("agent: %s=%q: want a whole number > 0", e.name, v)
			}
			*e.dst = n
		}
	}
	if v := getenv("BUB_MODEL_TIMEOUT_SECONDS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return Settings{}, fmt.Errorf("agent: BUB_MODEL_TIMEOUT_SECONDS=%q: want a number of seconds > 0", v)
		}
		s.Timeout = time.Duration(f * float64(time.Second))
	}
	if s.Model != "" {
		if _, _, err := model.Split(s.Model); err != nil {
			return Settings{}, fmt.Errorf("agent: BUB_MODEL / [agent] model: %w", err)
		}
	}
	return s.withDefaults(), nil
}

// checkPrefix refuses a command prefix with white space in it, which
// could never start a line's first word.
func checkPrefix(p string) error {
	if strings.IndexFunc(p, unicode.IsSpace) >= 0 {
		return errors.New("must not contain spaces")
	}
	return nil
}

func (s Settings) withDefaults() Settings {
	if s.CommandPrefix == "" {
		s.CommandPrefix = command.DefaultPrefix
	}
	if s.MaxSteps <= 0 {
		s.MaxSteps = DefaultMaxSteps
	}
	if s.MaxTokens <= 0 {
		s.MaxTokens = model.DefaultMaxTokens
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Getenv == nil {
		s.Getenv = func(string) string { return "" }
	}
	return s
}

// envName turns a provider into its variable prefix: "lm-studio" →
// "LM_STUDIO".
func envName(provider string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(provider) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ModelConfig resolves "provider:model" into a client configuration. The
// key is BUB_<PROVIDER>_API_KEY, else the settings' key, else the
// provider's conventional <PROVIDER>_API_KEY; the base URL is
// BUB_<PROVIDER>_API_BASE, else the settings' base, else the provider's
// default.
func (s Settings) ModelConfig(spec string) (model.Config, error) {
	provider, id, err := model.Split(spec)
	if err != nil {
		return model.Config{}, err
	}
	s = s.withDefaults()
	p := envName(provider)
	cfg := model.Config{Provider: provider, Model: id}
	for _, k := range []string{s.Getenv("BUB_" + p + "_API_KEY"), s.APIKey, s.Getenv(p + "_API_KEY")} {
		if k != "" {
			cfg.APIKey = k
			break
		}
	}
	for _, b := range []string{s.Getenv("BUB_" + p + "_API_BASE"), s.APIBase} {
		if b != "" {
			cfg.APIBase = b
			break
		}
	}
	return cfg, nil
}

// checkKey refuses, before any request, a call to a hosted provider
// without a key, naming the variables that would supply it.
func (s Settings) checkKey(cfg model.Config) error {
	if cfg.APIKey != "" || !model.NeedsKey(cfg.Provider, cfg.APIBase) {
		return nil
	}
	return fmt.Errorf("no API key for %s: set %s", cfg.Provider, keySources(cfg.Provider))
}

// keySources names where provider's key is read from, first first.
func keySources(provider string) string {
	p := envName(provider)
	return fmt.Sprintf("BUB_%s_API_KEY (or BUB_API_KEY, or %s_API_KEY), or name the variable holding it with [agent] api_key_env", p, p)
}

// ErrNoModel is returned when a turn needs a model and none is configured.
var ErrNoModel = errors.New("no model configured: set BUB_MODEL=provider:model (e.g. openrouter:openrouter/free, openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:qwen3) and its key (BUB_API_KEY or BUB_<PROVIDER>_API_KEY), or [agent] model in bub.toml; comma commands work without one")
