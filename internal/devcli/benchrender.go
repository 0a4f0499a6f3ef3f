//go:build !production

package devcli

import (
	"context"
	"fmt"
	"github.com/trawlerhq/trawler/internal/cli"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

func benchRenderCmd(s *cli.Settings) *cobra.Command {
	var pages int
	var browser cli.BrowserFlags
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Render pages built by JavaScript in headless Chromium: pages/s and peak memory against the pool's bound",
		Long: `Render --pages story pages of the bundled demo site that a script builds (/js/item/N),
through the same pool and renderer a worker uses: --browsers Chromium processes of --tabs
pages each, every page's requests answered by the worker's fetcher, each page waited for
until its article is built (render.wait_for). It samples the resident memory of this
process and of every Chromium process it started ten times a second and prints:

  pages/s       rendered pages per second over the whole run
  peak MiB      the highest sum of this process's RSS and its Chromium processes' PSS
  bound MiB     this process's RSS at start + 128, plus what the pool settings allow
                the Chromium processes: browsers × (browser-mb + tabs × 64)
  left          Chromium processes still alive after the pool closed (must be 0)

Chromium's processes share most of their pages (the binary, the zygote's heap): summed
RSS counts a shared page once in each process, PSS shares it out, so the PSS of all of
them adds up to the memory they really use. The pool recycles a browser on its PSS; the
summed RSS is printed too.`,
		Example: `  trawler bench render
  trawler bench render --pages 2000 --browsers 2 --tabs 4 --json
  trawler bench render --pages 500 --browsers 1 --browser-pages 50 --browser-mb 512`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := browser.Options(cmd)
			if err != nil {
				return err
			}
			if o == nil {
				return fmt.Errorf("no browser: install Debian's chromium package or give --browser PATH (and --browsers 1 or more)")
			}
			if pages < 1 {
				return fmt.Errorf("--pages %d: render at least 1 page", pages)
			}
			res, err := benchRender(cmd.Context(), *o, pages, s.JSON)
			if err != nil {
				return err
			}
			if s.JSON {
				return cli.PrintJSON(res)
			}
			fmt.Printf("%d pages built by script, %d browsers × %d tabs (replaced every %d pages or above %d MiB):\n",
				res.Pages, res.Browsers, res.Tabs, res.PagesPerBrowser, res.MaxMB)
			fmt.Printf("  %.1f pages/s, %d failed, %d browsers started, %d hung\n", res.PagesPerSec, res.Failed, res.Started, res.Hung)
			fmt.Printf("  peak memory %d MiB: this process's RSS (%d MiB at start) + its Chromium processes' PSS (peak %d MiB)\n", res.PeakMB, res.StartMB, res.PeakChromiumMB)
			fmt.Printf("  bound %d MiB (start + %d + browsers × (browser-mb + tabs × %d)): %s\n", res.BoundMB, workerHeadroomMB, render.PageMB,
				map[bool]string{true: "within", false: "EXCEEDED"}[res.PeakMB <= res.BoundMB])
			fmt.Printf("  (summing RSS instead, which counts the pages Chromium's processes share once in each: peak %d MiB)\n", res.PeakRSSMB)
			fmt.Printf("  Chromium processes left after the run: %d\n", res.Left)
			return nil
		},
	}
	cmd.Flags().IntVar(&pages, "pages", 2000, "pages to render")
	browser.Add(cmd)
	return cmd
}

type renderBenchResult struct {
	Pages           int     `json:"pages"`
	Failed          int64   `json:"failed"`
	Browsers        int     `json:"browsers"`
	Tabs            int     `json:"tabs"`
	PagesPerBrowser int     `json:"pages_per_browser"`
	MaxMB           int     `json:"browser_mb"`
	Seconds         float64 `json:"seconds"`
	PagesPerSec     float64 `json:"pages_per_sec"`
	StartMB         int64   `json:"start_mb"`
	PeakMB          int64   `json:"peak_mb"`
	PeakChromiumMB  int64   `json:"peak_chromium_mb"`
	PeakRSSMB       int64   `json:"peak_rss_sum_mb"`
	BoundMB         int64   `json:"bound_mb"`
	Started         int64   `json:"browsers_started"`
	Hung            int64   `json:"hung"`
	Left            int     `json:"left"`
}

// workerHeadroomMB is what the worker's own memory may grow by while it renders (the
// pages it holds, its buffers) in the bound the bench checks.
const workerHeadroomMB = 128

func benchRender(ctx context.Context, o render.Options, pages int, quiet bool) (*renderBenchResult, error) {
	const perPage = 100
	site, stop, err := demosite.Start("127.0.0.1:0", demosite.Options{Pages: (pages + perPage - 1) / perPage, PerPage: perPage})
	if err != nil {
		return nil, err
	}
	defer stop() //nolint:errcheck
	o.Log = slog.New(slog.DiscardHandler)
	pool, err := render.NewPool(o)
	if err != nil {
		return nil, err
	}
	o = pool.Options()
	res := &renderBenchResult{Pages: pages, Browsers: o.Browsers, Tabs: o.Tabs, PagesPerBrowser: o.PagesPerBrowser, MaxMB: o.MaxMB,
		StartMB: render.SelfRSS() >> 20}
	res.BoundMB = res.StartMB + workerHeadroomMB + int64(o.BoundMB())
	inner := fetch.New(fetch.Options{AllowPrivate: true})
	r := render.Renderer{Pool: pool, Inner: inner, Dial: inner.Dial,
		Opts: crawl.Render{Mode: crawl.RenderAlways, WaitFor: "article.story", Timeout: 15 * time.Second, Viewport: crawl.DefaultViewport, Block: crawl.DefaultRenderBlock}}

	var peak, peakRSS, peakChromium atomic.Int64
	sampled := make(chan struct{})
	sctx, stopSampling := context.WithCancel(ctx)
	go func() {
		defer close(sampled)
		for {
			chromium, self := pool.Usage(), render.SelfRSS()
			peakChromium.Store(max(peakChromium.Load(), chromium.PSS))
			peak.Store(max(peak.Load(), self+chromium.PSS))
			peakRSS.Store(max(peakRSS.Load(), self+chromium.RSS))
			select {
			case <-sctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	todo := make(chan int, pages)
	for i := 1; i <= pages; i++ {
		todo <- i
	}
	close(todo)
	var done atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for range o.Browsers * o.Tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range todo {
				if ctx.Err() != nil {
					return
				}
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := r.Fetch(pctx, &crawl.Request{URL: site + "/js/item/" + strconv.Itoa(i)})
				cancel()
				if err != nil {
					res.Failed++
					if !quiet {
						fmt.Fprintln(os.Stderr, err)
					}
				}
				if n := done.Add(1); !quiet && n%200 == 0 {
					fmt.Fprintf(os.Stderr, "  %d/%d pages, %.1f pages/s, peak %d MiB\n", n, pages, float64(n)/time.Since(began).Seconds(), peak.Load()>>20)
				}
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(began).Seconds()
	stopSampling()
	<-sampled
	st := pool.Stats()
	pool.Close()
	res.PagesPerSec = float64(pages) / res.Seconds
	res.PeakMB, res.PeakChromiumMB, res.PeakRSSMB = peak.Load()>>20, peakChromium.Load()>>20, peakRSS.Load()>>20
	res.Started, res.Hung = st.Started, st.Hung
	for _, p := range render.Processes() {
		if p.Owner == os.Getpid() {
			res.Left++
		}
	}
	return res, ctx.Err()
}
