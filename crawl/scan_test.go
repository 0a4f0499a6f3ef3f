package crawl_test

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawlerhq/trawler/crawl"
)

// Scan reads a scalar field from the first match of its css in document order, over
// every element of the selection, and a text from all the text inside the element, as
// goquery's Find(css).First().Text() gives them; a slice field reads every match.
func TestScanReadsWhatGoqueryFinds(t *testing.T) {
	const page = `<html><body>
<div class="e" id="one"><p>lead <b class="t">first <i>nested</i> text</b> tail</p>
  <span class="t">second</span><a class="l" href="/a?x=1#frag">A</a><a class="l" href="b">B</a>
  <!-- a comment --><em class="k" data-v=" 7 "> ignored </em></div>
<div class="e" id="two"><span class="t">third</span><a class="l" href="https://other.example/c">C</a></div>
<div class="e" id="three"></div>
</body></html>`
	type fields struct {
		Text  string   `css:".t"`
		Links []string `css:"a.l" attr:"href" type:"url"`
		Names []string `css:"a.l"`
		First string   `css:"a.l" attr:"href"`
		V     string   `css:".k" attr:"data-v"`
		Miss  string   `css:".k" attr:"data-missing"`
		ID    string   `attr:"id"`
		Num   int      `css:".k" attr:"data-v"`
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse("https://site.example/list/")
	cases := []struct {
		sel  *goquery.Selection
		want fields
	}{
		{doc.Find("#one"), fields{Text: "first nested text", Links: []string{"https://site.example/a?x=1", "https://site.example/list/b"},
			Names: []string{"A", "B"}, First: "/a?x=1#frag", V: "7", ID: "one", Num: 7}},
		{doc.Find("#two"), fields{Text: "third", Links: []string{"https://other.example/c"}, Names: []string{"C"}, First: "https://other.example/c", ID: "two"}},
		{doc.Find("#three"), fields{ID: "three"}},
		// Several elements: the first match in the first element that has one, and
		// every match of each for a slice field.
		{doc.Find("#three, #two, #one"), fields{Text: "first nested text",
			Links: []string{"https://site.example/a?x=1", "https://site.example/list/b", "https://other.example/c"},
			Names: []string{"A", "B", "C"}, First: "/a?x=1#frag", V: "7", ID: "one", Num: 7}},
		{doc.Find("#nothing"), fields{}},
	}
	for _, tc := range cases {
		var got fields
		if err := crawl.Scan(tc.sel, base, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v:\n got %+v\nwant %+v", tc.sel.Nodes, got, tc.want)
		}
		if len(tc.sel.Nodes) > 0 && got.Text != strings.TrimSpace(tc.sel.Find(".t").First().Text()) {
			t.Errorf("text %q, goquery reads %q", got.Text, tc.sel.Find(".t").First().Text())
		}
	}
}
