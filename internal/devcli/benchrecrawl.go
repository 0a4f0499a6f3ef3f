//go:build !production

package devcli

import (
	"context"
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/recrawl"
)

// Goals of adaptive recrawl against recrawling everything every tick.
const (
	recrawlGoalFewer = 0.60 // at least this share fewer pages fetched
	recrawlGoalLate  = 0.10 // at most this share of changes seen later than min
)

func benchRecrawlCmd(s *cli.Settings) *cobra.Command {
	var ticks, pages int
	var seed int64
	cmd := &cobra.Command{
		Use:   "recrawl",
		Short: "Run examples/recrawl.yaml over many ticks of a simulated clock and compare with recrawling everything",
		Long: `Measure adaptive recrawl on the demo site's live stories. The demo site serves --pages feed
pages of 30 stories; about 10% of the stories gain a vote every 3 to 15 minutes, 15% every
1 to 24 hours, the rest never change (deterministic from --seed). One embedded stack
(Temporal on SQLite, Redis) and a worker run examples/recrawl.yaml once per tick of a
simulated clock, which the site and the recrawl plans both read; ticks are the policy's
min apart (10m), as a cron schedule of the chain would fire.

Each run fetches the feed pages (which find new stories) and the stories due by their
plans. The baseline, recrawling everything every tick, fetches every feed page and every
story at every tick and so sees every change at the next tick: its pages are counted,
not run. A change counts as seen late when no visit fetched the story within one min
(10m) after it changed; changes still unseen at the end count when they are older than
min. Goals: at least 60% fewer pages than the baseline, at most 10% of changes late.`,
		Example: `  trawler bench recrawl
  trawler bench recrawl --ticks 576 --pages 10     # four simulated days, 300 stories
  trawler bench recrawl --json | tail -1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ticks < 2 {
				return fmt.Errorf("--ticks %d: use 2 or more ticks", ticks)
			}
			if pages < 1 {
				return fmt.Errorf("--pages %d: use 1 or more feed pages", pages)
			}
			res, err := benchRecrawl(cmd.Context(), s, ticks, pages, seed)
			if err != nil {
				return err
			}
			return printResult(s, res)
		},
	}
	cmd.Flags().IntVar(&ticks, "ticks", 288, "runs, one per tick of the policy's min (288 × 10m = two simulated days)")
	cmd.Flags().IntVar(&pages, "pages", 3, "feed pages of 30 stories each")
	cmd.Flags().Int64Var(&seed, "seed", 1, "seed of which stories change and how often")
	return cmd
}

// recrawlSide is what one way of recrawling cost and missed.
type recrawlSide struct {
	Pages      int     `json:"pages"`       // feed and story pages fetched
	StoryPages int     `json:"story_pages"` // story pages fetched
	Changes    int     `json:"changes"`
	Late       int     `json:"late"`
	LateShare  float64 `json:"late_share"`
}

type recrawlResult struct {
	Ticks        int           `json:"ticks"`
	Tick         string        `json:"tick"`
	Stories      int           `json:"stories"`
	Fast         int           `json:"fast"` // stories changing every few minutes
	Slow         int           `json:"slow"` // every few hours
	Seed         int64         `json:"seed"`
	Full         recrawlSide   `json:"full_recrawl"`
	Adaptive     recrawlSide   `json:"adaptive"`
	Fewer        float64       `json:"fewer_pages"` // share of the baseline's pages not fetched
	GoalFewer    float64       `json:"goal_fewer"`
	GoalLate     float64       `json:"goal_late"`
	GoalMet      bool          `json:"goal_met"`
	Plans        recrawl.Stats `json:"plans"`
	RunsSeconds  float64       `json:"runs_s"`
	MinInterval  string        `json:"min"`
	DueLastTick  int           `json:"due_last_tick"`
	FailedInputs int           `json:"failed"`
	tick         time.Duration
}

func (r *recrawlResult) print() {
	fmt.Printf("%d stories (%d change every few minutes, %d every few hours, the rest never; seed %d), %d ticks of %s (%s simulated)\n",
		r.Stories, r.Fast, r.Slow, r.Seed, r.Ticks, r.Tick, crawl.FormatDuration(time.Duration(r.Ticks)*r.tick))
	fmt.Printf("  %-20s %14s %12s   %s\n", "", "pages fetched", "story pages", "changes seen later than "+r.MinInterval)
	row := func(name string, s recrawlSide) {
		fmt.Printf("  %-20s %14d %12d   %d of %d (%.1f%%)\n", name, s.Pages, s.StoryPages, s.Late, s.Changes, 100*s.LateShare)
	}
	row("recrawl everything", r.Full)
	row("adaptive recrawl", r.Adaptive)
	fmt.Printf("  %.1f%% fewer pages (goal ≥ %.0f%%: %s); %.1f%% of changes late (goal ≤ %.0f%%: %s)\n",
		100*r.Fewer, 100*r.GoalFewer, verdict(r.Fewer >= r.GoalFewer), 100*r.Adaptive.LateShare, 100*r.GoalLate, verdict(r.Adaptive.LateShare <= r.GoalLate))
	fmt.Printf("  plans at the end: %d pages, intervals", r.Plans.Pages)
	for _, iv := range r.Plans.Intervals {
		if iv.Upto == "" {
			fmt.Printf(" >%s:%d", r.Plans.Intervals[len(r.Plans.Intervals)-2].Upto, iv.Pages)
		} else {
			fmt.Printf(" ≤%s:%d", iv.Upto, iv.Pages)
		}
	}
	fmt.Printf("; est. late share %.1f%%\n", 100*r.Plans.Late)
	fmt.Printf("  %d runs took %.1f s\n", r.Ticks, r.RunsSeconds)
}

func benchRecrawl(ctx context.Context, s *cli.Settings, ticks, pages int, seed int64) (*recrawlResult, error) {
	begin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	clock := demosite.NewClock(begin) // the site and the recrawl plans read it
	live := &demosite.Live{Seed: seed, Start: begin, Now: clock.Now}
	siteOpts := demosite.Options{Pages: pages, Live: live}.WithDefaults()
	base, stopSite, err := demosite.Start("127.0.0.1:0", siteOpts)
	if err != nil {
		return nil, fmt.Errorf("start the demo site: %w", err)
	}
	defer func() { _ = stopSite() }()
	data, err := os.MkdirTemp("", "trawler-bench-recrawl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	note := func(format string, args ...any) {
		if !s.JSON {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	note("starting embedded Temporal, Redis and a worker on a simulated clock…")
	c, _, stop, err := startBenchWorker(ctx, s, data, engine.WorkerOptions{Clock: clock.Now}, true)
	if err != nil {
		return nil, err
	}
	defer stop()
	src, err := examples.Files.ReadFile("recrawl.yaml")
	if err != nil {
		return nil, err
	}
	plan, err := cli.LoadChain("examples/recrawl.yaml", src, []string{"base_url=" + base, "feed.pages=" + strconv.Itoa(pages)})
	if err != nil {
		return nil, err
	}
	pol := *plan.Steps[1].Recrawl
	stories := siteOpts.Stories()
	res := &recrawlResult{Ticks: ticks, Tick: crawl.FormatDuration(pol.Min), tick: pol.Min, Stories: stories, Seed: seed,
		GoalFewer: recrawlGoalFewer, GoalLate: recrawlGoalLate, MinInterval: crawl.FormatDuration(pol.Min)}
	for id := 1; id <= stories; id++ {
		switch every := live.Every(id); {
		case every == 0:
		case every < time.Hour:
			res.Fast++
		default:
			res.Slow++
		}
	}
	began := time.Now()
	var tickTimes []time.Time
	for k := range ticks {
		at := begin.Add(time.Duration(k) * pol.Min)
		clock.Set(at)
		tickTimes = append(tickTimes, at)
		id, err := engine.Start(ctx, c, plan, engine.RunOptions{TaskQueue: s.TaskQueue})
		if err != nil {
			return nil, err
		}
		sum, err := engine.Wait(ctx, c, id, nil)
		if err != nil {
			return nil, err
		}
		p, _, _, failed := sum.Totals()
		res.Adaptive.Pages += p
		res.Adaptive.StoryPages += sum.Steps[1].Pages
		res.FailedInputs += failed
		res.DueLastTick = sum.Steps[1].Due
		if (k+1)%24 == 0 {
			note("tick %d/%d (%s simulated): %d pages fetched so far, %d due this tick", k+1, ticks, crawl.FormatDuration(time.Duration(k+1)*pol.Min), res.Adaptive.Pages, sum.Steps[1].Due)
		}
	}
	res.RunsSeconds = cli.RoundTo(time.Since(began).Seconds(), 1)
	if res.FailedInputs > 0 {
		return nil, fmt.Errorf("%d inputs failed; the comparison would not be fair", res.FailedInputs)
	}
	end := clock.Now()
	side := func(sd *recrawlSide, visits func(int) []time.Time) {
		r := live.Report(stories, pol.Min, end, visits)
		sd.Changes, sd.Late = r.Changes, r.Late
		if r.Changes > 0 {
			sd.LateShare = cli.RoundTo(float64(r.Late)/float64(r.Changes), 4)
		}
	}
	side(&res.Adaptive, nil)
	res.Full.StoryPages = ticks * stories
	res.Full.Pages = ticks * (stories + pages)
	side(&res.Full, func(int) []time.Time { return tickTimes })
	res.Fewer = cli.RoundTo(1-float64(res.Adaptive.Pages)/float64(res.Full.Pages), 4)
	res.GoalMet = res.Fewer >= recrawlGoalFewer && res.Adaptive.LateShare <= recrawlGoalLate
	rdb, err := s.RedisClient("for the plans")
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	sts, err := recrawl.New(rdb, clock.Now).Stats(ctx)
	if err != nil {
		return nil, err
	}
	if len(sts) == 1 {
		res.Plans = sts[0]
	}
	return res, nil
}
