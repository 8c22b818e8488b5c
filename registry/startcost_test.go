package registry

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
)

// childEnv makes the test binary, started by TestValidatorLibraryInitIsCheap,
// compile validators in a fresh process and exit instead of running tests.
const childEnv = "BUB_REGISTRY_TEST_FIRST_COMPILE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(firstCompiles())
	}
	os.Exit(m.Run())
}

// firstCompiles is the child's work: the process's first validator
// compilations, eight at once, so that the metaschemas are loaded by
// concurrent first callers (with -race, a data race there fails the
// child), then a validation that needs them.
func firstCompiles() int {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	vs := make([]*validator, 8)
	for i := range vs {
		wg.Go(func() { vs[i], errs[i] = compileValidator(fmt.Sprintf("t%d", i), schema) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(os.Stderr, "compileValidator #%d: %v\n", i, err)
			return 1
		}
	}
	if _, e := vs[0].check(json.RawMessage(`{"n":0}`), nil, false, "t0"); e == nil {
		fmt.Fprintln(os.Stderr, `check({"n":0}) passed; want a minimum error`)
		return 1
	}
	// A schema the metaschema refuses: only a loaded metaschema says so.
	if _, err := compileValidator("bad", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integr"}}}`)); err == nil {
		fmt.Fprintln(os.Stderr, `compileValidator("integr" type) succeeded; want a metaschema error`)
		return 1
	}
	return 0
}

// initTraceRE matches GODEBUG=inittrace=1's line for the JSON Schema
// library: "init <pkg> @<t> ms, <clock> ms clock, <bytes> bytes, <n> allocs".
var initTraceRE = regexp.MustCompile(`init github\.com/santhosh-tekuri/jsonschema/v6 @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs`)

// TestValidatorLibraryInitIsCheap checks that linking registry does not
// cost every bub-mcp process the JSON Schema library's metaschemas at
// start-up: upstream compiles all five drafts' in its init (1.7 MB, 21k
// allocations, about a third of the time from spawn to the first
// tools/list, see third_party/santhosh-tekuri/jsonschema/PATCHES.md).
// They are compiled on the first validator compilation instead, which a
// fresh process (this test binary, re-run) does from eight goroutines at
// once, and they still refuse an invalid schema.
func TestValidatorLibraryInitIsCheap(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m := initTraceRE.FindSubmatch(out)
	if m == nil {
		// No init work left at all would do too, but the package's
		// variables are built in init; a missing line means the trace
		// format changed, and this test would pass for the wrong reason.
		t.Fatalf("no inittrace line for github.com/santhosh-tekuri/jsonschema/v6 in:\n%s", out)
	}
	bytes, _ := strconv.Atoi(string(m[1]))
	allocs, _ := strconv.Atoi(string(m[2]))
	// Upstream v6.0.3: 1,700,000 bytes and 21,000 allocations.
	if bytes > 64<<10 || allocs > 500 {
		t.Errorf("the JSON Schema library's init allocates %d bytes in %d allocations; want at most 64 KiB and 500: are the metaschemas compiled in init again?", bytes, allocs)
	}
}
