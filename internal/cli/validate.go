package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/engine"
)

func validateCmd(s *Settings) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check chain files: every problem with file:line and the fix",
		Long: `Check chain files against the registered tasks without running anything: unknown
tasks, fields and params, param types, missing required params, ` + "`from`" + ` naming no step,
cycles (a step may consume only itself, with max_depth), ` + "`each`" + ` on a field that is not
a list, bad durations, unknown sinks, politeness blocks (rate: 2/s, delay: 250ms,
concurrency, group, robots, host patterns). Exits 1 when any file has a problem.`,
		Example: `  trawler validate examples/*.yaml
  trawler validate my-chain.yaml --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// With --data, the stack's addresses fill ${…}; a chain is checked without a
			// stack too, so a stack that cannot be read is no error here.
			_ = s.Resolve()
			type fileResult struct {
				File     string   `json:"file"`
				OK       bool     `json:"ok"`
				Problems []string `json:"problems,omitempty"`
			}
			bad := 0
			var results []fileResult
			for _, f := range args {
				r := fileResult{File: f, OK: true}
				data, err := readChainFile(cmd.Context(), f)
				if cmd.Context().Err() != nil {
					return err // interrupted: the files left are not checked
				}
				if err == nil {
					// Compiled as run compiles it: a chain too large to start fails here.
					_, err = engine.LoadChainFile(f, data, nil, StackVars)
				}
				if err != nil {
					r.OK = false
					bad++
					var ps crawl.Problems
					if errors.As(err, &ps) {
						for _, p := range ps {
							r.Problems = append(r.Problems, p.String())
						}
					} else {
						r.Problems = []string{err.Error()}
					}
				}
				results = append(results, r)
			}
			if s.JSON {
				_ = writeJSONTo(cmd.OutOrStdout(), results)
			} else {
				for _, r := range results {
					if r.OK {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", r.File)
					}
					for _, p := range r.Problems {
						fmt.Fprintln(cmd.ErrOrStderr(), p)
					}
				}
			}
			if bad > 0 {
				if !s.JSON {
					fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d files have problems\n", bad, len(args))
				}
				return exitError(1)
			}
			return nil
		},
	}
}
