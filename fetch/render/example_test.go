package render_test

import (
	"fmt"

	"github.com/trawlerhq/trawler/fetch/render"
)

// The kind of a page is what the pool measures browser memory by: the step, the host
// and the URL's shape, with numbers and the query taken out, so every item page of a
// step is one kind.
func ExampleKind() {
	fmt.Println(render.Kind("detail", "https://shop.example/item/123?ref=home"))
	fmt.Println(render.Kind("detail", "https://shop.example/item/456"))
	// Output:
	// detail shop.example/item/#
	// detail shop.example/item/#
}
