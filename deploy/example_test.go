package deploy_test

import (
	"fmt"
	"os"
	"strings"
)

// The kustomization lists the manifests of a Trawler cluster: `kubectl apply -k deploy/`
// applies them all.
func Example() {
	k, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(string(k), "\n") {
		if strings.HasPrefix(line, "  - ") && strings.HasSuffix(line, ".yaml") {
			fmt.Println(strings.TrimPrefix(line, "  - "))
		}
	}
	// Output:
	// namespace.yaml
	// settings.yaml
	// secrets.yaml
	// worker.yaml
	// console.yaml
	// keda-scaledobject.yaml
}
