package crawl_test

import (
	"fmt"

	"github.com/trawlerhq/trawler/crawl"
)

// Two addresses of one page have one canonical URL: the seen-set, dedup keys and
// recrawl plans all know the page by it.
func ExampleCanonicalURL() {
	for _, u := range []string{
		"HTTPS://Shop.Example:443/a/./b/../item?id=7&utm_source=mail#reviews",
		"https://shop.example/a/item?id=7",
	} {
		c, err := crawl.CanonicalURL(u, crawl.CanonOptions{})
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(c)
	}
	// Output:
	// https://shop.example/a/item?id=7
	// https://shop.example/a/item?id=7
}
