package model

import (
	"errors"
	"strings"
	"testing"
)

// TestStreamErrorHidesKey: an error event in a model stream that quotes
// the API key (as some servers' refusals do) reaches the terminal, the
// tape and agent_run's client without it.
func TestStreamErrorHidesKey(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	err := streamError("openai", key, errors.New(`error event: "Incorrect API key provided: `+key+`"`))
	if msg := err.Error(); strings.Contains(msg, key) || !strings.Contains(msg, "[redacted API key]") {
		t.Errorf("stream error = %q; want the key cut out", msg)
	}
}
