package pystub_test

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bubbuild/bub-mcp/codemode/pystub"
)

func ExampleGenerate() {
	stub, err := pystub.Generate([]pystub.Tool{{
		Name:         "orders_get",
		Description:  "Look up an order by id.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","description":"The order identifier."},"include_items":{"type":"boolean","default":false}},"required":["order_id"]}`),
		OutputSchema: json.RawMessage(`{"title":"Order","type":"object","properties":{"id":{"type":"string"},"total":{"type":"number"}},"required":["id","total"]}`),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The stub opens with a module docstring and the typing import; the
	// declarations follow, two blank lines apart. Print the declarations.
	for _, decl := range strings.Split(stub, "\n\n\n")[1:] {
		fmt.Println(decl)
	}
	// Output:
	// class Order(TypedDict):
	//     id: str
	//     total: float
	// async def orders_get(*, order_id: str, include_items: bool = False) -> Order:
	//     """Look up an order by id.
	//
	//     Args:
	//         order_id: The order identifier.
	//     """
	//     ...
}

func ExampleIdentifier() {
	for _, name := range []string{"orders_get", "mcp_search-docs", "2fa", "match"} {
		fmt.Printf("%s -> tools.%s\n", name, pystub.Identifier(name))
	}
	// Output:
	// orders_get -> tools.orders_get
	// mcp_search-docs -> tools.mcp_search_docs
	// 2fa -> tools._2fa
	// match -> tools._match
}
