package command_test

import (
	"fmt"

	"github.com/bubbuild/bub-mcp/agent/command"
)

func ExampleParse() {
	line, _ := command.Strip(`,fs.write path='notes.txt' content="hello world"`, "")
	c, err := command.Parse(line)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Name)
	for _, k := range c.Keywords {
		fmt.Printf("%s=%q\n", k.Key, k.Value)
	}
	_, err = command.Parse("fs.read path=a.txt 10")
	fmt.Println(err)
	// Output:
	// fs.write
	// path="notes.txt"
	// content="hello world"
	// positional argument '10' cannot appear after keyword arguments
}
