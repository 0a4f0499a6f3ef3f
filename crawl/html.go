package crawl

import (
	"errors"
	"io"
	"strings"

	"golang.org/x/net/html"

	"github.com/trawlerhq/trawler/crawl/internal/htmltree"
)

// htmlDepthLimit is how deep golang.org/x/net/html lets elements nest; it fails a
// deeper page with the message htmlDepthMessage (there is no error value to match).
const (
	htmlDepthLimit   = "512"
	htmlDepthMessage = "open stack of elements exceeds " + htmlDepthLimit + " nodes"
)

// ParseHTML parses an HTML page, as html.Parse does. A page nested deeper than the
// parser allows fails permanently (another fetch gets the same page) with cause parse
// and a message that names the limit and what to do instead.
func ParseHTML(r io.Reader) (*html.Node, error) {
	page, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return ParseHTMLBytes(page)
}

// ParseHTMLBytes is ParseHTML for a page already read. It builds html.Parse's tree,
// several times faster for well-nested markup (see crawl/internal/htmltree). The text
// nodes' Data share one copy of the page: copy (strings.Clone) text kept beyond the
// page, or it keeps the whole page in memory. Attribute values are strings of their own.
func ParseHTMLBytes(page []byte) (*html.Node, error) {
	root, err := htmltree.Parse(page)
	if err != nil && strings.Contains(err.Error(), htmlDepthMessage) {
		return nil, WithCause(Permanent(errors.New("the page nests elements deeper than "+htmlDepthLimit+
			" levels (the HTML parser's limit), so it cannot be read as HTML; take its data from the site's JSON API with a JSON task, "+
			"or match the raw body (Page.Body) with a regular expression in a Go task")), CauseParse)
	}
	return root, err
}
