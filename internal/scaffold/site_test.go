package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A module written without --replace requires no version of Trawler that does not
// exist: `go get github.com/trawlerhq/trawler@latest`, which the command prints next,
// adds the requirement (a made-up v0.0.0 would make it fail reading v0.0.0's go.mod). With
// --replace, the requirement and the replacement point at the checkout.
func TestModuleGoModRequiresOnlyWhatExists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acme")
	if _, err := WriteSite(SiteOptions{Name: "acme", Dir: dir, Module: "example.com/acme"}); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mod), "github.com/trawlerhq/trawler") {
		t.Errorf("go.mod of a checkout's build requires Trawler at a version that does not exist:\n%s", mod)
	}

	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "acme")
	if _, err := WriteSite(SiteOptions{Name: "acme", Dir: dir, Module: "example.com/acme", Replace: repo}); err != nil {
		t.Fatal(err)
	}
	if mod, err = os.ReadFile(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"require github.com/trawlerhq/trawler v0.0.0\n", "replace github.com/trawlerhq/trawler => " + repo + "\n"} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod with --replace lacks %q:\n%s", want, mod)
		}
	}
}
