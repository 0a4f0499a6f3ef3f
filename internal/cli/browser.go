package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/fetch/render"
)

// browserFlags give a worker its headless browsers for the steps that render pages.
type BrowserFlags struct {
	path                  string
	browsers, tabs, pages int
	mb                    int
}

func (f *BrowserFlags) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "browser", render.DefaultBrowser, "`PATH` of the headless Chromium that renders the pages of steps with render:, or \"none\" for no browser (the worker then leaves those steps to workers with one)")
	cmd.Flags().IntVar(&f.browsers, "browsers", 2, "Chromium processes at once (each starts when a page needs it)")
	cmd.Flags().IntVar(&f.tabs, "tabs", 4, "pages rendered at once per Chromium process")
	cmd.Flags().IntVar(&f.pages, "browser-pages", 200, "replace a Chromium process after it rendered this many pages")
	cmd.Flags().IntVar(&f.mb, "browser-mb", 1024, "replace a Chromium process whose processes hold more than this many MiB (PSS) after a page")
}

// options are the pool's settings, or nil for a worker without a browser: --browser
// none, --browsers 0, or the default browser not installed. A browser named on the
// command line must exist.
func (f *BrowserFlags) Options(cmd *cobra.Command) (*render.Options, error) {
	if f.path == "none" || f.browsers <= 0 {
		return nil, nil
	}
	if _, err := os.Stat(f.path); err != nil {
		if cmd.Flags().Changed("browser") {
			return nil, fmt.Errorf("--browser %s: %v; install Debian's chromium package or give the path of a Chromium", f.path, err)
		}
		return nil, nil
	}
	return &render.Options{Path: f.path, Browsers: f.browsers, Tabs: f.tabs, PagesPerBrowser: f.pages, MaxMB: f.mb}, nil
}

// browserLine says on the worker's first line what it renders with.
func browserLine(o *render.Options) string {
	if o == nil {
		return "; no browser: steps with render: run on workers that have one"
	}
	return fmt.Sprintf("; renders with %s: %d browsers × %d tabs, at most %d MiB", o.Path, o.Browsers, o.Tabs, o.BoundMB())
}

// stackBrowser is the browser of the worker `trawler dev` and `trawler demo` start:
// Debian's chromium when installed, with the pool's defaults.
func StackBrowser() *render.Options {
	if _, err := os.Stat(render.DefaultBrowser); err != nil {
		return nil
	}
	return &render.Options{}
}
