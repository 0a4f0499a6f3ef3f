package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/fetch/charset"
	"github.com/trawlerhq/trawler/internal/scaffold"
)

func newCmd(s *Settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Start a site: a task package on the SDK (new site) or a config-driven chain inferred from a page (new chain)",
		Long: `Write the starting point of a new site.

  trawler new site NAME    a Go package sites/NAME with a feed and a detail task on the task
                           SDK, recorded pages and a test, and examples/NAME.yaml
  trawler new chain URL    fetch a list page, find its items, title, links and next page,
                           and write a chain of generic.html_list (+ generic.html_detail);
                           or a JSON API response: a chain of generic.json`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSiteCmd(s), newChainCmd(s))
	return cmd
}

func newSiteCmd(s *Settings) *cobra.Command {
	var o scaffold.SiteOptions
	cmd := &cobra.Command{
		Use:   "site NAME",
		Short: "Write a site package (feed and detail tasks on the task SDK, recorded pages, a test) and its chain file",
		Long: `Write sites/NAME/: NAME.go with two tasks on the task SDK (crawl.HTMLTask): NAME.feed
walks the list pages (crawl.URLOf gives the first, p.FollowAll hands every entry's link to
NAME.detail, p.Follow the next page back to itself) and NAME.detail stores one item per
page from a struct whose tags say what to extract; NAME_test.go runs both tasks against
the recorded pages in testdata/ served by httptest, asserting the exact items and
follows; and examples/NAME.yaml, the chain feed → detail.

The selectors match the bundled demo site, so the test passes and, without --base-url,
the chain runs on a ` + "`trawler dev`" + ` stack as written; then change them for your site,
record its pages into testdata/ and keep the test exact. With --base-url the chain starts
at your site with the demo site's selectors, which find nothing there until you change
them. NAME is a lowercase Go identifier; an existing
package directory or chain file is refused unless --force.

The tasks register themselves when the package is imported: the command prints the
blank import to add to cmd/trawler/main.go next to the other sites.

With --module PATH it writes a Go module of its own instead, for a repository of your
team's (in --dir, default ./NAME): go.mod requiring github.com/trawlerhq/trawler,
main.go calling cli.Main with the site's tasks (so ` + "`go build`" + ` yields the whole trawler
command with them), the package NAME/, chain.yaml and a Makefile (build, test, dev,
run). Until Trawler is published, --replace DIR points go.mod at a local checkout.`,
		Example: `  trawler new site acme
  trawler new site acme --base-url https://news.acme.example
  go test ./sites/acme && trawler validate examples/acme.yaml
  trawler new site acme --dir sites --examples examples --force --json
  trawler new site acme --module github.com/acme/crawlers --dir ../crawlers --replace .`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.BaseURL != "" {
				u, err := url.Parse(o.BaseURL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return fmt.Errorf("--base-url %q: want an absolute http(s) URL such as https://news.example.com", o.BaseURL)
				}
			}
			if o.Module == "" && o.Replace != "" {
				return fmt.Errorf("--replace %s: only a module of its own (--module PATH) has a go.mod to point at a checkout", o.Replace)
			}
			if o.Module != "" && !cmd.Flags().Changed("dir") {
				o.Dir = o.Name
			}
			res, err := scaffold.WriteSite(o)
			if err != nil {
				return err
			}
			if s.JSON {
				return PrintJSON(res)
			}
			if o.Module != "" {
				fmt.Printf("wrote module %s in %s (tasks %s):\n", o.Module, relOrAbs(res.Module), strings.Join(res.Tasks, ", "))
				for _, f := range res.Files {
					fmt.Println("  " + f)
				}
				fmt.Printf("\nThen, in %s:\n", relOrAbs(res.Module))
				if o.Replace == "" {
					fmt.Println("  go get github.com/trawlerhq/trawler@latest && go mod tidy")
				}
				fmt.Println("  make test     the tasks against the recorded pages, and the chain file")
				fmt.Println("  make build    bin/" + o.Name + ": trawler with the site's tasks")
				fmt.Println("  make dev      an embedded stack, from Trawler's own binary (TRAWLER=path/to/trawler; one terminal),")
				fmt.Println("  make worker   this binary's worker on it (a second), then make run (a third)")
				return nil
			}
			fmt.Printf("wrote package %s (tasks %s):\n", res.Package, strings.Join(res.Tasks, ", "))
			for _, f := range res.Files {
				fmt.Println("  " + f)
			}
			fmt.Println()
			if res.ImportLine != "" {
				fmt.Printf("Register its tasks: add this line to the import block of %s,\nnext to _ \"github.com/trawlerhq/trawler/internal/sites/demo\":\n\n\t%s\n\n", res.ImportInto, res.ImportLine)
			} else {
				fmt.Println("Register its tasks: import the package (blank import) in the binary's main package.")
			}
			if o.BaseURL == "" {
				fmt.Printf("Then:\n  go test %s\n  trawler validate %s\n  trawler run %s --data .data/dev --wait\n", relOrAbs(res.Package), relOrAbs(res.Chain), relOrAbs(res.Chain))
				return nil
			}
			fmt.Printf("Then:\n  go test %s\n  trawler validate %s\n", relOrAbs(res.Package), relOrAbs(res.Chain))
			fmt.Printf("The chain starts at %s, but its selectors are the demo site's: change them in %s\n(try one page first: trawler try %s %s), record that site's pages into testdata/,\nthen trawler run %s.\n", o.BaseURL, relOrAbs(res.Package), res.Tasks[0], o.BaseURL, relOrAbs(res.Chain))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "sites", "parent `DIR` of the new package")
	f.StringVar(&o.ExamplesDir, "examples", "examples", "`DIR` of the chain file NAME.yaml")
	f.StringVar(&o.BaseURL, "base-url", "", "the site's root `URL` (default: the demo site, ${demo_site:-http://127.0.0.1:8089} in the chain)")
	f.BoolVar(&o.Force, "force", false, "overwrite an existing package directory and chain file")
	f.StringVar(&o.Module, "module", "", "write a Go module of its own with this module `PATH` (go.mod, main.go, the package, chain.yaml, Makefile) in --dir (default ./NAME)")
	f.StringVar(&o.Replace, "replace", "", "with --module: a local checkout `DIR` of Trawler for go.mod's replace, until it is published")
	return cmd
}

func relOrAbs(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			if !strings.HasPrefix(r, ".") && strings.Contains(r, string(filepath.Separator)) && !strings.HasSuffix(r, ".yaml") {
				return "./" + filepath.ToSlash(r)
			}
			return filepath.ToSlash(r)
		}
	}
	return p
}

// newChainResult is what `trawler new chain --json` prints.
type newChainResult struct {
	File     string                   `json:"file"`
	Name     string                   `json:"name"`
	List     scaffold.ListFindings    `json:"list,omitzero"` // an HTML list page
	Detail   *scaffold.DetailFindings `json:"detail,omitempty"`
	JSON     *scaffold.JSONFindings   `json:"json,omitempty"` // a JSON API response
	Valid    bool                     `json:"valid"`
	Problems []string                 `json:"problems,omitempty"`
}

var chainNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func newChainCmd(s *Settings) *cobra.Command {
	var (
		out      string
		name     string
		maxPages int
		force    bool
		timeout  time.Duration
		private  privateFlag
	)
	cmd := &cobra.Command{
		Use:   "chain URL",
		Short: "Fetch a list page or JSON API response, find its items and next page, and write a generic chain",
		Long: `Fetch a list page with the real fetcher and write a config-driven chain for it:

  items   the list: groups of 3 or more sibling elements with the same tag and class that
          contain links, ranked by how many there are and how much text their main link has
  fields  title (a heading in every item, else the main link's text) and link (its href)
  next    a link with rel=next, else one whose text is Next, More, Older, 下一页, » …
  detail  when the items link to distinct pages of the same site: a generic.html_detail
          step reading title (the first h1) and text (article, main, or the element with
          the most paragraph text) from the first item's page

When the response is JSON (Content-Type application/json or *+json, or a body opening
with { or [), it writes one generic.json step instead:

  items   the largest array of objects (the document itself when it is one), stored
          with every key as it is
  key     a field set and distinct in every item: id, _id, uuid, key, slug or *_id
  paging  a next link in the response (next, links.next, …) → next_path, else a cursor
          (next_cursor, paging.cursors.after, …) → cursor_path, else a page number
          (page, p) or an offset (offset, start, skip) in the URL; has_more_path when
          the response has a boolean has_more

It prints what it found and why, the runner-up lists, and checks the written file as
` + "`trawler validate`" + ` does. Like a worker, it refuses loopback and private addresses unless
--allow-private (or TRAWLER_ALLOW_PRIVATE=1), except the demo site of the stack --data
names. robots.txt is obeyed. --json prints one
object: the file, the findings and the validation.`,
		Example: `  trawler new chain 'https://news.example.com/latest'
  trawler new chain 'http://127.0.0.1:8089/news?p=1' --allow-private --name demo-news --out chains/demo-news.yaml
  trawler new chain 'https://shop.example.com/c/shoes' --max-pages 10 --json
  trawler try generic.html_list --params chains/demo-news.yaml --allow-private
  trawler new chain 'http://127.0.0.1:8089/api/stories?page=1' --allow-private --name demo-api`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			allowPrivate, err := private.resolve(cmd)
			if err != nil {
				return err
			}
			u, err := url.Parse(args[0])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%q: want an absolute http(s) URL of a list page", args[0])
			}
			if name == "" {
				name = strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(strings.TrimPrefix(u.Hostname(), "www.")), "-"), "-")
			}
			if !chainNameRE.MatchString(name) {
				return fmt.Errorf("--name %q: lowercase letters, digits, - and _", name)
			}
			if out == "" {
				out = name + ".yaml"
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("%s already exists; --out another file, or --force to overwrite it", out)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			fetcher := fetch.New(fetch.Options{AllowPrivate: allowPrivate, AllowAddrs: s.stackSite(), Timeout: timeout})
			page, err := fetchPage(ctx, fetcher, u.String())
			if err != nil {
				return err
			}
			opts := scaffold.ChainOptions{Name: name, URL: u, MaxPages: maxPages}
			res := newChainResult{File: out, Name: name, Valid: true}
			var data []byte
			if scaffold.IsJSON(page.contentType, page.body) {
				data, err = jsonChain(opts, page, &res)
			} else {
				data, err = htmlChain(ctx, fetcher, opts, page, &res)
			}
			if err != nil {
				return err
			}
			if _, err := crawl.Load(out, data, crawl.LoadOptions{Sinks: knownSinks}); err != nil {
				res.Valid = false
				var ps crawl.Problems
				if errors.As(err, &ps) {
					for _, p := range ps {
						res.Problems = append(res.Problems, p.String())
					}
				} else {
					res.Problems = []string{err.Error()}
				}
			}
			if dir := filepath.Dir(out); dir != "." {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return err
			}
			if s.JSON {
				if err := PrintJSON(res); err != nil {
					return err
				}
			} else {
				// The "next:" commands work as pasted: they keep --allow-private and --data.
				var next nextFlags
				if cmd.Flags().Changed("allow-private") && allowPrivate {
					next.try = " --allow-private"
				}
				if s.Data != "" {
					next.try += " --data " + s.Data
					next.run = " --data " + s.Data
				}
				printNewChain(res, next)
			}
			if !res.Valid {
				return exitError(1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "chain `FILE` to write (default NAME.yaml)")
	f.StringVar(&name, "name", "", "chain `NAME` (default from the host: news-example-com)")
	f.IntVar(&maxPages, "max-pages", 3, "max_pages of the list step: list pages to follow per start URL")
	f.BoolVar(&force, "force", false, "overwrite --out when it exists")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up fetching after this long")
	private.add(cmd, "fetch loopback and private addresses (a local site); link-local and cloud metadata stay refused")
	return cmd
}

// fetchedPage is one response as the project's fetcher returns it, before it is read
// as HTML or JSON.
type fetchedPage struct {
	url         string // as requested
	final       *url.URL
	contentType string
	body        []byte
}

// fetchPage fetches one page with the project's fetcher: robots.txt, the fetch guard and
// statuses as a worker sees them.
func fetchPage(ctx context.Context, f crawl.Fetcher, u string) (fetchedPage, error) {
	resp, err := f.Fetch(ctx, &crawl.Request{Method: "GET", URL: u})
	if err != nil {
		return fetchedPage{}, err
	}
	final := resp.URL
	if final == "" {
		final = u
	}
	fu, err := url.Parse(final)
	if err != nil {
		return fetchedPage{}, err
	}
	return fetchedPage{url: u, final: fu, contentType: resp.Header.Get("Content-Type"), body: resp.Body}, nil
}

// html parses the page as HTML in its charset.
func (p fetchedPage) html() (*goquery.Document, error) {
	body, err := charset.HTML(p.body, p.contentType, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", p.url, err)
	}
	root, err := crawl.ParseHTMLBytes(body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: parse HTML: %w", p.url, err)
	}
	doc := goquery.NewDocumentFromNode(root)
	doc.Url = p.final
	return doc, nil
}

// fetchDoc fetches and parses one HTML page.
func fetchDoc(ctx context.Context, f crawl.Fetcher, u string) (*goquery.Document, *url.URL, error) {
	p, err := fetchPage(ctx, f, u)
	if err != nil {
		return nil, nil, err
	}
	doc, err := p.html()
	if err != nil {
		return nil, nil, err
	}
	return doc, p.final, nil
}

// htmlChain reads an HTML list page (and its first item's page) into res and writes a
// generic.html_list chain.
func htmlChain(ctx context.Context, fetcher crawl.Fetcher, o scaffold.ChainOptions, page fetchedPage, res *newChainResult) ([]byte, error) {
	doc, err := page.html()
	if err != nil {
		return nil, err
	}
	list, err := scaffold.AnalyzeList(doc, page.final)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", o.URL, err)
	}
	if list.Detail {
		ddoc, dfinal, err := fetchDoc(ctx, fetcher, list.Links[0])
		if err != nil {
			list.Detail = false
			list.DetailWhy += fmt.Sprintf("; but its first page did not load (%v): the items are stored from the list", err)
		} else {
			d := scaffold.AnalyzeDetail(ddoc, dfinal.String())
			res.Detail = &d
		}
	}
	res.List = list
	return scaffold.ChainYAML(o, list, res.Detail)
}

// jsonChain reads a JSON API response into res and writes a generic.json chain.
func jsonChain(o scaffold.ChainOptions, page fetchedPage, res *newChainResult) ([]byte, error) {
	body, err := charset.Text(page.body, page.contentType, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", page.url, err)
	}
	j, err := scaffold.AnalyzeJSON(body, page.final)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", o.URL, err)
	}
	res.JSON = &j
	return scaffold.JSONChainYAML(o, j)
}

// nextFlags are the flags that the printed next commands, try and run, carry.
type nextFlags struct{ try, run string }

func printNewChain(r newChainResult, next nextFlags) {
	if r.JSON != nil {
		printJSONFindings(*r.JSON)
		printWritten(r, "generic.json", next)
		return
	}
	l := r.List
	fmt.Printf("items   %s: %s\n", l.Items.Selector, l.Items.Why)
	for _, c := range l.Candidates[1:] {
		fmt.Printf("        runner-up %s (%d, score %.0f)\n", c.Selector, c.Count, c.Score)
	}
	fmt.Printf("title   %s: %s\n", orItem(l.Title), l.TitleWhy)
	fmt.Printf("link    %s: %d links, e.g. %s\n", orItem(l.Items.Link), len(l.Links), first(l.Links))
	if l.Next != "" {
		fmt.Printf("next    %s: %s\n", l.Next, l.NextWhy)
	} else {
		fmt.Printf("next    none: %s\n", l.NextWhy)
	}
	fmt.Printf("detail  %v: %s\n", l.Detail, l.DetailWhy)
	if d := r.Detail; d != nil {
		fmt.Printf("        title %s: %s\n        text  %s: %s\n", d.Title, d.TitleWhy, d.Text, d.TextWhy)
	}
	printWritten(r, "generic.html_list", next)
}

func printJSONFindings(j scaffold.JSONFindings) {
	fmt.Printf("items   %s: %s\n", orDocument(j.Items.Path), j.Items.Why)
	for _, c := range j.Candidates[1:] {
		fmt.Printf("        runner-up %s (%d objects)\n", orDocument(c.Path), c.Count)
	}
	fmt.Printf("fields  every key of the item as it is: %s\n", strings.Join(j.Fields, ", "))
	fmt.Printf("key     %s: %s\n", orNone(j.Key), j.KeyWhy)
	switch j.Paging {
	case "":
		fmt.Printf("paging  none: %s\n", j.PagingWhy)
	case "cursor_path":
		fmt.Printf("paging  cursor_path %s, cursor_param %s: %s\n", j.CursorPath, j.CursorParam, j.PagingWhy)
	default:
		fmt.Printf("paging  %s %s: %s\n", j.Paging, j.NextPath+j.PageParam+j.OffsetParam, j.PagingWhy)
	}
	if j.HasMorePath != "" {
		fmt.Printf("        has_more_path %s: %s\n", j.HasMorePath, j.HasMoreWhy)
	}
}

// printWritten says where the chain went and whether it validates.
func printWritten(r newChainResult, task string, next nextFlags) {
	if r.Valid {
		fmt.Printf("wrote %s: ok (checked as trawler validate does)\n", r.File)
		fmt.Printf("next: trawler try %s --params %s%s; trawler run %s%s --wait\n", task, r.File, next.try, r.File, next.run)
		return
	}
	fmt.Printf("wrote %s, with problems:\n", r.File)
	for _, p := range r.Problems {
		fmt.Fprintln(os.Stderr, "  "+p)
	}
}

func orDocument(path string) string {
	if path == "" {
		return "(the document)"
	}
	return path
}

func orNone(path string) string {
	if path == "" {
		return "none"
	}
	return path
}

func orItem(sel string) string {
	if sel == "" {
		return "(the item)"
	}
	return sel
}

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}
