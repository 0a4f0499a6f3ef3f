package examples_test

import (
	"fmt"
	"strings"

	"github.com/trawlerhq/trawler/examples"
)

// The chain files are embedded: a program reads them wherever it runs.
func Example() {
	demo, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(string(demo), "\n") {
		if name, ok := strings.CutPrefix(line, "name:"); ok {
			name, _, _ = strings.Cut(name, "#")
			fmt.Println("chain", strings.TrimSpace(name))
		}
	}
	// Output:
	// chain demo
}
