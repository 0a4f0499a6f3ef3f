package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
)

func itemsCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "items",
		Short: "Work with the records in the hot store (MongoDB)",
	}
	cmd.AddCommand(itemsClaimCmd(s))
	return cmd
}

func itemsClaimCmd(s *Settings) *cobra.Command {
	var biz, tenant string
	var n int
	cmd := &cobra.Command{
		Use:   "claim --biz SITE.TASK [--tenant TENANT] [--n N]",
		Short: "Hand up to N new records of a task over to a downstream processor",
		Long: `Claim is the hand-off from the crawl to downstream processors. The mongo sink keeps the
latest copy of every record with a processing flag: 0 when it is new, 1 once claimed.
Claim flips up to N records of one task (oldest fetch first) from 0 to 1 and prints
them, so each record is handed to exactly one processor even when several claim at
once (findAndModify on MongoDB). A re-crawled record keeps its flag: it is not handed
out again.

Records are per tenant, like dedup and history: --tenant (default "default") picks whose
records to claim. Two tenants crawling the same task keep separate records, and one
tenant's claims never take the other's.

Records come from the MongoDB of --mongo (or TRAWLER_MONGO, or the dev stack of
--data), database "trawler", collection <site>_<task>. With --json stdout holds one JSON
line per claimed record and nothing else (the item as the jsonl sink writes it, with
flag 1), ready to pipe into a processor; the count goes to stderr.`,
		Example: `  trawler items claim --biz demo.story --n 10 --data .data/dev
  trawler items claim --biz demo.story --tenant acme --n 10 --data .data/dev
  trawler items claim --biz demo.comments --n 500 --json --mongo mongodb://mongo-1/?replicaSet=rs0 | my-processor`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if biz == "" || !strings.Contains(biz, ".") {
				return fmt.Errorf("--biz %q: give the task whose records to claim, as site.task (e.g. demo.story)", biz)
			}
			if n < 1 {
				return fmt.Errorf("--n %d: claim 1 or more records", n)
			}
			if err := s.Resolve(); err != nil {
				return err
			}
			if s.Mongo == "" {
				return fmt.Errorf("no MongoDB configured: pass --mongo mongodb://HOST:PORT (or TRAWLER_MONGO, or --data of a running `trawler dev`)")
			}
			sinks, err := engine.OpenSinks(engine.SinkOptions{Mongo: s.Mongo, Log: s.Logger()})
			if err != nil {
				return err
			}
			defer sinks.Close()
			m := sinks["mongo"].(*mongo.Sink)
			ctx := cmd.Context()
			got, err := m.Claim(ctx, tenant, biz, n)
			// Records already flipped are ours: print them even if a later one failed.
			for _, it := range got {
				if s.JSON {
					b, jerr := json.Marshal(it)
					if jerr != nil {
						return jerr
					}
					fmt.Println(string(b))
					continue
				}
				title := ""
				if t, ok := it.Data["title"].(string); ok {
					title = "  " + t
				}
				fmt.Printf("%s  %s  %s%s\n", it.Key, it.TS.Local().Format(time.DateTime), it.URL, title)
			}
			if err != nil {
				return err
			}
			if len(got) == 0 {
				fmt.Fprintf(os.Stderr, "no new records of %s (tenant %s) to claim\n", biz, tenant)
			} else {
				fmt.Fprintf(os.Stderr, "claimed %d record(s) of %s (tenant %s)\n", len(got), biz, tenant)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&biz, "biz", "", "the task whose records to claim, site.task (e.g. demo.story)")
	cmd.Flags().IntVar(&n, "n", 100, "claim at most this many records")
	cmd.Flags().StringVar(&tenant, "tenant", crawl.DefaultTenant, "tenant whose records to claim: `TENANT` (each tenant's records are kept apart)")
	return cmd
}
