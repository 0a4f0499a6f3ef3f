package crawl_test

import (
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// Two links to one page are one fetch, however the page that linked them wrote them;
// what tells pages apart (path case, another query value) keeps them apart.
func TestSeenKeyIsTheCanonicalURL(t *testing.T) {
	key := func(in crawl.Input) string {
		k, ok := crawl.SeenKey(in)
		if !ok {
			t.Fatalf("%+v has no key", in)
		}
		return k
	}
	same := []string{
		"http://Shop.Example:80/cat/../item/7?b=2&a=1#reviews",
		"http://shop.example/item/7?a=1&b=2&utm_source=mail&gclid=x",
		"http://user:pw@shop.example/item/%37?a=1&b=2",
	}
	want := key(crawl.Input{URL: same[0]})
	for _, u := range same[1:] {
		if got := key(crawl.Input{URL: u, Vars: map[string]any{"title": "from a list row"}}); got != want {
			t.Errorf("%s: key %q, want %q (one page)", u, got, want)
		}
	}
	for _, u := range []string{"http://shop.example/Item/7?a=1&b=2", "http://shop.example/item/7?a=1&b=3", "https://shop.example/item/7?a=1&b=2"} {
		if key(crawl.Input{URL: u}) == want {
			t.Errorf("%s has the key of another page", u)
		}
	}
	if _, ok := crawl.SeenKey(crawl.Input{Vars: map[string]any{"page": 2}}); ok {
		t.Error("an input of variables alone got a key")
	}
}
