package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/testbin"

	"github.com/bubbuild/bub-mcp/internal/pgtest"
)

// conformanceBinary is bub-mcp with the conformance fixtures.
func conformanceBinary(t *testing.T) string {
	return testbin.Build(t, "github.com/bubbuild/bub-mcp/internal/conformance/cmd/bub-mcp-conformance")
}

var scenarioRE = regexp.MustCompile(`^(✓|✗) ([^:\s]+)`)

// TestConformanceThroughReplicas runs the 2026-07-28 requirement set of
// the MCP conformance suite (e2e/conformance.sh --next) against three
// replicas of the fixture server on one PostgreSQL behind the round-robin
// proxy: every scenario that passes against one server must pass through
// the replicas; the known gaps of e2e/known-gaps-2026-07-28.txt are
// reported apart, as e2e/run.sh does.
func TestConformanceThroughReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite")
	}
	if _, err := os.Stat("../e2e/node_modules/conformance-next"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("conformance suite not installed (e2e/setup.sh installs it)")
	}
	dsn := pgtest.DSN(t)
	bin := conformanceBinary(t)
	ws := t.TempDir()
	src := fmt.Sprintf("[store]\nkind = \"postgres\"\ndsn_env = \"BUB_TEST_DSN\"\n[profiles.default]\nworkspace = %q\n", ws)
	cfg := writeConfig(t, src)
	// Replicas share the requestState key, or a multi-round-trip call
	// could not resume on another replica (README, Deploy).
	env := append(os.Environ(), "BUB_CONFIG="+cfg, "BUB_TEST_DSN="+dsn, "BUB_STATE_KEY=replicas-of-one-service-share-this-key")
	var backends []string
	for range 3 {
		backends = append(backends, startHTTPReplicaBin(t, bin, env))
	}
	proxy := roundRobin(t, backends)

	cmd := exec.Command("bash", "../e2e/conformance.sh", "--next", "server", "--url", proxy+"/mcp", "--requirements", "2026-07-28", "--timeout", "10000")
	out, _ := cmd.CombinedOutput() // its exit status counts the known gaps too
	gaps := map[string]bool{}
	if b, err := os.ReadFile("../e2e/known-gaps-2026-07-28.txt"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				gaps[l] = true
			}
		}
	}
	// The unscored scenarios are listed after the summary: find them
	// first, as e2e/run.sh does.
	lines := strings.Split(string(out), "\n")
	unscored := map[string]bool{}
	for i, line := range lines {
		if !strings.HasPrefix(line, "Not scored for ") {
			continue
		}
		for _, l := range lines[i+1:] {
			if !strings.HasPrefix(l, "  ") {
				break
			}
			if m := scenarioRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				unscored[m[2]] = true
			}
		}
	}
	var passed, failed []string
	inSummary := false
	for _, line := range lines {
		if strings.HasPrefix(line, "=== SUMMARY ===") {
			inSummary = true
			continue
		}
		if strings.HasPrefix(line, "Not scored for ") {
			break
		}
		m := scenarioRE.FindStringSubmatch(line)
		if !inSummary || m == nil || unscored[m[2]] {
			continue
		}
		if m[1] == "✓" {
			passed = append(passed, m[2])
		} else if !gaps[m[2]] {
			failed = append(failed, m[2])
		}
	}
	if len(passed) == 0 {
		t.Fatalf("no scenario passed through the replicas; output:\n%s", out)
	}
	if len(failed) > 0 {
		t.Errorf("scenarios failing through the replicas (and not known gaps): %v\n%s", failed, out)
	}
	t.Logf("2026-07-28 through three replicas: %d passed, %d known gaps", len(passed), len(gaps))
}
