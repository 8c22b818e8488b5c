package model_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/bubbuild/bub-mcp/agent/model"
)

// recordURL is a transport that remembers the URL it was asked for and
// fails, so no request leaves the machine.
type recordURL struct{ url string }

func (r *recordURL) RoundTrip(req *http.Request) (*http.Response, error) {
	r.url = req.URL.String()
	return nil, errors.New("no network in tests")
}

// TestDefaultBaseURLs: with no base URL configured, each client aims at
// its provider's API (anthropic: once failed with "base url is not set").
func TestDefaultBaseURLs(t *testing.T) {
	for _, tt := range []struct{ provider, want string }{
		{"anthropic", "https://api.anthropic.com/v1/messages"},
		{"openai", "https://api.openai.com/v1/chat/completions"},
		{"openrouter", "https://openrouter.ai/api/v1/chat/completions"},
	} {
		rt := &recordURL{}
		c, err := model.New(model.Config{Provider: tt.provider, Model: "m", APIKey: "k", HTTPClient: &http.Client{Transport: rt}})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := c.Stream(context.Background(), &model.Request{Model: "m", Messages: []model.Message{{Role: "user", Content: "hi"}}})
		if err == nil {
			_, err = model.Collect(seq, nil)
		}
		if err == nil || rt.url != tt.want {
			t.Errorf("%s: requested %q (error %v); want %q", tt.provider, rt.url, err, tt.want)
		}
	}
}

func TestNeedsKey(t *testing.T) {
	for _, tt := range []struct {
		provider, base string
		want           bool
	}{
		{"anthropic", "", true},
		{"openai", "", true},
		{"openrouter", "", true},
		{"ollama", "", false},
		{"lmstudio", "", false},
		{"openai", "http://127.0.0.1:9999/v1", false},
		{"openai", "http://gpu-box.local:8000/v1", true},
		{"openai", "http://10.0.0.7:8000/v1", false},
		{"mycorp", "https://llm.example.com/v1", false},
	} {
		if got := model.NeedsKey(tt.provider, tt.base); got != tt.want {
			t.Errorf("NeedsKey(%q, %q) = %v; want %v", tt.provider, tt.base, got, tt.want)
		}
	}
}
