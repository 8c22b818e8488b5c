package model_test

import (
	"errors"
	"fmt"

	"github.com/bubbuild/bub-mcp/agent/model"
)

func ExampleSplit() {
	for _, spec := range []string{"openrouter:openrouter/free", "ollama:qwen3:8b", "gpt-4o"} {
		provider, id, err := model.Split(spec)
		if err != nil {
			fmt.Println("error")
			continue
		}
		fmt.Println(provider, id)
	}
	// Output:
	// openrouter openrouter/free
	// ollama qwen3:8b
	// error
}

func ExampleIsContextLength() {
	err := &model.Error{Provider: "openai", StatusCode: 400, Message: "This model's maximum context length is 8192 tokens."}
	fmt.Println(model.IsContextLength(err), model.IsRetryable(err))
	fmt.Println(model.IsRetryable(&model.Error{StatusCode: 503, Retryable: true}), model.IsContextLength(errors.New("bad key")))
	// Output:
	// true false
	// true false
}
