package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsoleTokenSources: --token-file and TRAWLER_TOKEN_FILE give the token; flags win
// over the environment; a missing or empty file is named in the error.
func TestConsoleTokenSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWLER_TOKEN", "")
	t.Setenv("TRAWLER_TOKEN_FILE", "")
	if tok, err := consoleToken("", file, "token"); err != nil || tok != "from-file" {
		t.Errorf("--token-file: %q %v", tok, err)
	}
	t.Setenv("TRAWLER_READ_TOKEN_FILE", file)
	if tok, err := consoleToken("", "", "read-token"); err != nil || tok != "from-file" {
		t.Errorf("TRAWLER_READ_TOKEN_FILE: %q %v", tok, err)
	}
	if tok, err := consoleToken("flag", "", "read-token"); err != nil || tok != "flag" {
		t.Errorf("--read-token over the environment: %q %v", tok, err)
	}
	t.Setenv("TRAWLER_TOKEN", "env")
	if tok, err := consoleToken("", "", "token"); err != nil || tok != "env" {
		t.Errorf("TRAWLER_TOKEN: %q %v", tok, err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := consoleToken("", missing, "token"); err == nil || !strings.Contains(err.Error(), "--token-file "+missing) {
		t.Errorf("missing --token-file: %v", err)
	}
	t.Setenv("TRAWLER_TOKEN_FILE", file)
	if _, err := consoleToken("", "", "token"); err == nil || !strings.Contains(err.Error(), "TRAWLER_TOKEN and TRAWLER_TOKEN_FILE") {
		t.Errorf("both variables: %v", err)
	}
}
