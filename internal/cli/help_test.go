package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// placeholder is what a flag's help may show for its value: a word in capitals (DIR,
// HOST:PORT …) or the flag's type.
var placeholder = regexp.MustCompile(`^([A-Z][A-Z0-9_:,.\[\]…=-]*|string|strings|int|int64|float|float64|duration|stringArray|stringToString|uint|bool)?$`)

// Every flag of every command reads well in --help: cobra takes the first `quoted` word
// of a flag's usage as its value's placeholder, so a usage that quotes a command shows
// `--data trawler dev`; the placeholder must be a word in capitals or the type.
func TestFlagHelpShowsPlaceholders(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			name, usage := pflag.UnquoteUsage(f)
			if !placeholder.MatchString(name) {
				t.Errorf("%s --%s: help shows %q as its value (usage %q); quote no command in a flag's usage", c.CommandPath(), f.Name, name, usage)
			}
			if strings.TrimSpace(usage) == "" {
				t.Errorf("%s --%s has no help", c.CommandPath(), f.Name)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}
