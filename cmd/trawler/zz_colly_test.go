package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gocolly/colly/v2"

	"trawler/internal/devstack/demosite"
)

func TestZZColly(t *testing.T) {
	base, stop, _ := demosite.Start("127.0.0.1:0", demosite.Options{Pages: 20})
	defer stop()
	out := filepath.Join(t.TempDir(), "c.jsonl")
	collyCrawl(context.Background(), base, 20, 16, out)
	for i := 0; i < 6; i++ {
		n, err := collyCrawl(context.Background(), base, 20, 16, out)
		if err != nil {
			t.Fatal(err)
		}
		o, err := collyCrawlOld(context.Background(), base, 20, 16, out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("new %+v old %+v", n, o)
	}
}

// collyCrawl crawls the demo site the way the demo chain does, with Colly.
func collyCrawlOld(ctx context.Context, base string, feedPages, parallelism int, outPath string) (benchSide, error) {
	out, err := createJSONLines(outPath)
	if err != nil {
		return benchSide{}, err
	}
	c := colly.NewCollector(colly.Async(true), colly.StdlibContext(ctx))
	c.AllowURLRevisit = false
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: parallelism}); err != nil {
		_ = out.close()
		return benchSide{}, err
	}
	c.WithTransport(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: max(parallelism, 16),
		IdleConnTimeout:     90 * time.Second,
	})

	var (
		pages    atomic.Int64
		errMu    sync.Mutex
		crawlErr error
	)
	fail := func(err error) {
		errMu.Lock()
		crawlErr = errors.Join(crawlErr, err)
		errMu.Unlock()
	}
	visit := func(e *colly.HTMLElement, href string) {
		var seen *colly.AlreadyVisitedError
		if err := e.Request.Visit(href); err != nil && !errors.As(err, &seen) {
			fail(fmt.Errorf("visit %s from %s: %w", href, e.Request.URL, err))
		}
	}
	c.OnResponse(func(r *colly.Response) { pages.Add(1) })
	c.OnError(func(r *colly.Response, err error) {
		fail(fmt.Errorf("GET %s: status %d: %w", r.Request.URL, r.StatusCode, err))
	})
	c.OnHTML("html", func(e *colly.HTMLElement) {
		u := e.Request.URL
		doc := e.DOM
		switch {
		case u.Path == "/news":
			page, _ := strconv.Atoi(u.Query().Get("p"))
			doc.Find("tr.athing span.titleline > a").Each(func(_ int, a *goquery.Selection) {
				visit(e, a.AttrOr("href", ""))
			})
			if page < feedPages {
				if href, ok := doc.Find("a.morelink").First().Attr("href"); ok {
					visit(e, href)
				}
			}
		case collyStoryPath.MatchString(u.Path):
			it, comments, err := collyStory(u, doc.Find("article.story").First())
			if err != nil {
				fail(err)
				return
			}
			out.write(it)
			if comments > 0 {
				if href, ok := doc.Find("article.story a.comments-link").First().Attr("href"); ok {
					visit(e, href)
				}
			}
		case collyCommentsPath.MatchString(u.Path):
			story, _ := strconv.Atoi(collyCommentsPath.FindStringSubmatch(u.Path)[1])
			doc.Find("div.comments div.comment").Each(func(_ int, cm *goquery.Selection) {
				id, err := strconv.Atoi(cm.AttrOr("data-id", ""))
				if err != nil {
					fail(fmt.Errorf("%s: comment without an id", u))
					return
				}
				out.write(collyItem{Type: "demo.comments", Key: "demo:comment:" + strconv.Itoa(id), URL: u.String() + "#c" + strconv.Itoa(id),
					Data: map[string]any{
						"id":     id,
						"story":  story,
						"author": strings.TrimSpace(cm.Find(".author").First().Text()),
						"text":   strings.TrimSpace(cm.Find("div.text").First().Text()),
					}})
			})
			if href, ok := doc.Find("a.morelink").First().Attr("href"); ok {
				visit(e, href)
			}
		}
	})

	start := time.Now()
	if err := c.Visit(base + "/news?p=1"); err != nil {
		_ = out.close()
		return benchSide{}, err
	}
	c.Wait()
	cerr := out.close()
	elapsed := time.Since(start)
	if err := errors.Join(crawlErr, cerr, ctx.Err()); err != nil {
		return benchSide{}, err
	}
	return newBenchSide(int(pages.Load()), out.n, elapsed), nil
}
