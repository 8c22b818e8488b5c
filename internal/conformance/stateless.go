package conformance

// Fixtures for the 2026-07-28 (stateless) requirement set of the
// conformance suite: the server-stateless diagnostic tools and the
// input-required-result-* (SEP-2322, multi round-trip) tools and prompt.
//
// The tools ask the client only through the ToolContext (tc.Elicit,
// tc.Sample, tc.Log), exactly as a production tool would; turning those
// calls into an InputRequiredResult on the 2026-07-28 wire, resuming from
// inputResponses/requestState, and into real server-to-client requests on
// the 2025-11-25 wire is the MCP layer's job. The keys the suite expects in
// inputRequests (see e2e/CONFORMANCE.md §7.6) are noted per fixture.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/bubbuild/bub-mcp/mcpserver"
	"github.com/bubbuild/bub-mcp/providers"
	"github.com/bubbuild/bub-mcp/registry"
)

const (
	nameSchema    = `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	confirmSchema = `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`
	colorSchema   = `{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`
	contextSchema = `{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}`
)

// ask elicits under key (the suite checks some keys by name).
func ask(ctx context.Context, tc *registry.ToolContext, key, message, schema string) (*registry.ElicitResult, error) {
	return tc.Elicit(ctx, registry.ElicitRequest{Key: key, Message: message, Schema: json.RawMessage(schema)})
}

func sampleText(ctx context.Context, tc *registry.ToolContext, key, text string, maxTokens int) (*registry.SampleResult, error) {
	return tc.Sample(ctx, registry.SampleRequest{Key: key, Messages: []registry.SampleMessage{{Role: "user", Text: text}}, MaxTokens: maxTokens})
}

func rootList(roots []registry.Root) string {
	uris := make([]string, len(roots))
	for i, r := range roots {
		uris[i] = r.URI
	}
	return strings.Join(uris, ", ")
}

func field(res *registry.ElicitResult, name string) string {
	if res == nil || res.Content == nil {
		return ""
	}
	return fmt.Sprint(res.Content[name])
}

func statelessFixtures() []*registry.Tool {
	var ts []*registry.Tool
	add := func(t *registry.Tool) { ts = append(ts, t) }

	// server-stateless (SEP-2575) diagnostics.

	// Called with clientCapabilities {}: the sampling request must fail
	// with -32021 {requiredCapabilities:{sampling:{}}}, HTTP 400.
	missing := noArgs("test_missing_capability", "Needs the client's sampling capability (it is rejected when undeclared).", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		res, err := sampleText(ctx, tc, "", "This request needs the sampling capability.", 10)
		if err != nil {
			return nil, err
		}
		return "Sampled: " + res.Text, nil
	})
	missing.Requires = []string{"sampling"}
	add(missing)
	// Called with clientCapabilities {elicitation:{}}: the response stream
	// may carry notifications and the InputRequiredResult, never an
	// elicitation/create request.
	add(noArgs("test_streaming_elicitation", "Elicits input; on the stateless wire this must come back as an InputRequiredResult.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		res, err := ask(ctx, tc, "", "What is your name?", nameSchema)
		if err != nil {
			return nil, err
		}
		return "Hello, " + field(res, "name") + "!", nil
	}))
	// Called without _meta logLevel: none of these may reach the client.
	add(noArgs("test_logging_tool", "Logs while it runs (nothing is sent unless the request sets a log level).", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		for _, msg := range []string{"Logging tool started", "Logging tool finished"} {
			tc.Log(ctx, slog.LevelInfo, "conformance", msg)
		}
		return "Logging tool completed", nil
	}))

	// input-required-result-* (SEP-2322).

	// Key "user_name" (checked by basic-elicitation, used blind by
	// ignore-extra-params).
	add(noArgs("test_input_required_result_elicitation", "Asks for the user's name, then greets them.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		res, err := ask(ctx, tc, "user_name", "What is your name?", nameSchema)
		if err != nil {
			return nil, err
		}
		return "Hello, " + field(res, "name") + "!", nil
	}))
	// Key "capital_question" (doc only).
	add(noArgs("test_input_required_result_sampling", "Asks the client's model for the capital of France.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		res, err := sampleText(ctx, tc, "capital_question", "What is the capital of France?", 100)
		if err != nil {
			return nil, err
		}
		return "Sampling answer: " + res.Text, nil
	}))
	// Key "confirm" (doc only); the result must mention "state-ok".
	add(noArgs("test_input_required_result_request_state", "Asks for a confirmation carried across a requestState.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		res, err := ask(ctx, tc, "confirm", "Please confirm", confirmSchema)
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("state-ok: action=%s, ok=%s", res.Action, field(res, "ok")), nil
	}))
	// Keys "client_roots" (doc only); the result names the roots.
	add(noArgs("test_input_required_result_list_roots", "Lists the client's roots.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		roots, err := tc.Roots(ctx)
		if err != nil {
			return nil, err
		}
		return "Roots: " + rootList(roots), nil
	}))
	// Keys "user_name", "greeting", "client_roots" (doc only), asked in
	// one round: the asks run concurrently, so each is recorded before
	// the run ends.
	add(noArgs("test_input_required_result_multiple_inputs", "Asks for a name, a generated greeting and the roots at once.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		var (
			wg       sync.WaitGroup
			name     *registry.ElicitResult
			greeting *registry.SampleResult
			roots    []registry.Root
			errs     [3]error
		)
		wg.Add(3)
		go func() { defer wg.Done(); name, errs[0] = ask(ctx, tc, "user_name", "What is your name?", nameSchema) }()
		go func() {
			defer wg.Done()
			greeting, errs[1] = sampleText(ctx, tc, "greeting", "Generate a greeting", 50)
		}()
		go func() { defer wg.Done(); roots, errs[2] = tc.Roots(ctx) }()
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return nil, err
		}
		return fmt.Sprintf("%s, %s! (roots: %s)", greeting.Text, field(name, "name"), rootList(roots)), nil
	}))
	// Keys "step1", then "step2" (doc only): each round needs a new
	// requestState, and round 3 carries only step2's answer.
	add(noArgs("test_input_required_result_multi_round", "Asks two questions, one per round.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		name, err := ask(ctx, tc, "step1", "Step 1: What is your name?", nameSchema)
		if err != nil {
			return nil, err
		}
		color, err := ask(ctx, tc, "step2", "Step 2: What is your favorite color?", colorSchema)
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("%s likes %s", field(name, "name"), field(color, "color")), nil
	}))
	// The retry carries requestState+"-TAMPERED"; it must fail with a
	// JSON-RPC error.
	add(noArgs("test_input_required_result_tampered_state", "Asks for a confirmation; a tampered requestState is refused.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		res, err := ask(ctx, tc, "confirm", "Please confirm", confirmSchema)
		if err != nil {
			return nil, err
		}
		return fmt.Sprintf("Confirmed: ok=%s", field(res, "ok")), nil
	}))
	// Called with clientCapabilities {sampling:{}} only: the elicitation
	// must not be requested (tc.Elicit fails), the sampling must.
	add(noArgs("test_input_required_result_capabilities", "Asks by elicitation and sampling, as far as the client supports each.", func(ctx context.Context, tc *registry.ToolContext) (any, error) {
		var (
			wg     sync.WaitGroup
			name   *registry.ElicitResult
			answer *registry.SampleResult
			serr   error
		)
		wg.Add(2)
		// The name is optional: a client without elicitation is not asked.
		go func() { defer wg.Done(); name, _ = ask(ctx, tc, "user_name", "What is your name?", nameSchema) }()
		go func() { defer wg.Done(); answer, serr = sampleText(ctx, tc, "hello", "Say hello", 20) }()
		wg.Wait()
		if serr != nil {
			return nil, serr
		}
		who := field(name, "name")
		if who == "" {
			who = "anonymous"
		}
		return fmt.Sprintf("%s (for %s)", answer.Text, who), nil
	}))
	return ts
}

// statelessPrompts are test_input_required_result_prompt, an MRTR prompt
// (input-required-result-non-tool-request): it asks the user for its
// context first; mcp-go bridges the question to a real
// elicitation/create for 2025-11-25 clients.
func statelessPrompts() []mcpserver.Prompt {
	return []mcpserver.Prompt{{Name: "test_input_required_result_prompt", Description: "A prompt that asks the user for its context first",
		Get: func(ctx context.Context, conn *providers.Connection, req *mcpserver.PromptRequest) (*mcpserver.PromptResult, error) {
			answer := req.Elicitation("user_context")
			if answer == nil {
				return &mcpserver.PromptResult{Elicit: []mcpserver.Question{{Key: "user_context", Message: "What context should the prompt use?", Schema: json.RawMessage(contextSchema)}}}, nil
			}
			if answer.Action != "accept" {
				return nil, fmt.Errorf("the user did not provide a context (%s)", answer.Action)
			}
			return &mcpserver.PromptResult{Description: "A prompt with user-supplied context", Messages: []mcpserver.PromptMessage{
				userText(fmt.Sprintf("Use this context: %v", answer.Content["context"])),
			}}, nil
		}}}
}
