package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
)

func configCmd(s *Settings) *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Show the settings a command would use, and where each comes from",
	}
	c.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Print every setting with its value and its source: flag, env, endpoints.json or default",
		Long: `Print every setting with its value and where it came from. Each setting resolves by
one rule: its flag, else its TRAWLER_* environment variable, else the endpoints.json of
the --data directory (a running 'trawler dev'), else its default. Passwords in URLs and
secret query parameters are masked; secrets themselves are only ever named by file.`,
		Example: `  trawler config show --data .data/dev
  TRAWLER_REDIS=redis://cache:6379 trawler config show --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Resolve(); err != nil {
				return err
			}
			type shown struct {
				Setting string `json:"setting"`
				Env     string `json:"env"`
				Value   string `json:"value"`
				Source  string `json:"source"`
			}
			var rows []shown
			for _, r := range s.table() {
				v := ""
				if r.boolean != nil {
					v = strconv.FormatBool(*r.boolean)
				} else if s.off[r.flag] {
					v = storeOff
				} else {
					v = crawl.RedactText(*r.str)
				}
				rows = append(rows, shown{Setting: r.flag, Env: r.env, Value: v, Source: s.sources[r.flag]})
			}
			out := cmd.OutOrStdout()
			if s.JSON {
				return writeJSONTo(out, map[string]any{"settings": rows})
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SETTING\tVALUE\tSOURCE\tENV")
			for _, r := range rows {
				v := r.Value
				if v == "" {
					v = "-"
				}
				fmt.Fprintf(w, "--%s\t%s\t%s\t%s\n", r.Setting, v, r.Source, r.Env)
			}
			return w.Flush()
		},
	})
	return c
}
