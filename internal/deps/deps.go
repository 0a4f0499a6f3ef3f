//go:build tools

// Package deps pins modules whose importers are still being written.
package deps

import (
	_ "github.com/PuerkitoBio/goquery"
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/antchfx/htmlquery"
	_ "github.com/antchfx/xmlquery"
	_ "github.com/chromedp/chromedp"
	_ "github.com/gocolly/colly/v2"
	_ "github.com/mmcdole/gofeed"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/spf13/cobra"
	_ "github.com/temoto/robotstxt"
	_ "github.com/temporalio/ui-server/v2/server"
	_ "github.com/tidwall/gjson"
	_ "github.com/tsuna/gohbase"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/sdk/worker"
	_ "go.temporal.io/server/temporal"
	_ "go.temporal.io/server/temporaltest"
	_ "golang.org/x/net/html/charset"
	_ "golang.org/x/time/rate"
	_ "gopkg.in/yaml.v3"
)
