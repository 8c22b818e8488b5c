package agent_test

import (
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/agent"
	"github.com/bubbuild/bub-mcp/agent/model"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLoadSettings(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	file := agent.Config{Model: "ollama:qwen3", APIKeyEnv: "MY_KEY", MaxSteps: 7, MaxTokens: 100, TimeoutSeconds: 9}
	env["MY_KEY"] = "from-file-var"
	s, err := agent.LoadSettings(file, getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Settings{Model: "ollama:qwen3", APIKey: "from-file-var", MaxSteps: 7, MaxTokens: 100, Timeout: 9 * time.Second, CommandPrefix: ","}
	if diff := cmp.Diff(want, s, cmpopts.IgnoreFields(agent.Settings{}, "Getenv")); diff != "" {
		t.Errorf("from bub.toml (-want +got):\n%s", diff)
	}

	env["BUB_MODEL"] = "anthropic:claude-x"
	env["BUB_API_KEY"] = "generic"
	env["BUB_MAX_STEPS"] = "3"
	env["BUB_MODEL_TIMEOUT_SECONDS"] = "1.5"
	s, err = agent.LoadSettings(file, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if s.Model != "anthropic:claude-x" || s.APIKey != "generic" || s.MaxSteps != 3 || s.Timeout != 1500*time.Millisecond {
		t.Errorf("env overrides: %+v", s)
	}

	env["BUB_MAX_STEPS"] = "0"
	if _, err := agent.LoadSettings(file, getenv); err == nil {
		t.Error("BUB_MAX_STEPS=0 accepted")
	}
	env["BUB_MAX_STEPS"] = ""
	env["BUB_MODEL"] = "gpt-4o"
	if _, err := agent.LoadSettings(file, getenv); err == nil {
		t.Error("BUB_MODEL without a provider accepted")
	}

	env["BUB_MODEL"] = ""
	for _, tt := range []struct {
		file, env, want string
		ok              bool
	}{
		{"", "", ",", true},
		{"/", "", "/", true},
		{"/", "!!", "!!", true},
		{"a b", "", "", false},
		{"", "\t;", "", false},
	} {
		env["BUB_COMMAND_PREFIX"] = tt.env
		s, err := agent.LoadSettings(agent.Config{CommandPrefix: tt.file}, getenv)
		if (err == nil) != tt.ok || s.CommandPrefix != tt.want {
			t.Errorf("command_prefix %q, BUB_COMMAND_PREFIX %q: prefix %q, error %v; want %q (ok=%v)", tt.file, tt.env, s.CommandPrefix, err, tt.want, tt.ok)
		}
	}

	d, err := agent.LoadSettings(agent.Config{}, nil)
	if err != nil || d.MaxSteps != 50 || d.MaxTokens != 16384 || d.Timeout != 120*time.Second || d.Model != "" {
		t.Errorf("defaults = %+v, %v", d, err)
	}
}

func TestModelConfig(t *testing.T) {
	env := map[string]string{
		"BUB_OPENROUTER_API_KEY": "or-key",
		"OPENAI_API_KEY":         "openai-conventional",
		"BUB_OLLAMA_API_BASE":    "http://gpu-box:11434/v1",
	}
	s := agent.Settings{APIKey: "generic", Getenv: func(k string) string { return env[k] }}
	tests := []struct {
		spec string
		want model.Config
	}{
		{"openrouter:openrouter/free", model.Config{Provider: "openrouter", Model: "openrouter/free", APIKey: "or-key"}},
		{"openai:gpt-4o-mini", model.Config{Provider: "openai", Model: "gpt-4o-mini", APIKey: "generic"}},
		{"ollama:qwen3:8b", model.Config{Provider: "ollama", Model: "qwen3:8b", APIKey: "generic", APIBase: "http://gpu-box:11434/v1"}},
		{"LM-Studio:x", model.Config{Provider: "lm-studio", Model: "x", APIKey: "generic"}},
	}
	for _, tt := range tests {
		got, err := s.ModelConfig(tt.spec)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(model.Config{}, "HTTPClient")); diff != "" {
			t.Errorf("ModelConfig(%q) (-want +got):\n%s", tt.spec, diff)
		}
	}
	s.APIKey = ""
	if got, _ := s.ModelConfig("openai:gpt"); got.APIKey != "openai-conventional" {
		t.Errorf("conventional key = %q", got.APIKey)
	}
	if _, err := model.New(model.Config{Provider: "nowhere", Model: "m"}); err == nil {
		t.Error("unknown provider without a base URL accepted")
	}
}
