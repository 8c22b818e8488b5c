package upstream_test

import (
	"fmt"

	"github.com/bubbuild/bub-mcp/upstream"
)

// Upstream tools are namespaced by their server, with characters models
// cannot call replaced; names past the 64-character limit keep a hash of
// the original so they stay unique.
func ExampleRuntimeName() {
	fmt.Println(upstream.RuntimeName("everything", "get-sum"))
	fmt.Println(upstream.RuntimeName("github", "repos/list.all"))
	fmt.Println(upstream.RuntimeName("search", "a_tool_name_that_goes_on_and_on_well_past_what_models_accept"))
	// Output:
	// everything.get-sum
	// github.repos_list_all
	// search.a_tool_name_that_goes_on_and_on_well_past_what_m_dc53d530
}
