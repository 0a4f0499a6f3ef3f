package charset_test

import (
	"fmt"

	"github.com/trawlerhq/trawler/fetch/charset"
)

// A page in GBK, as its <meta charset> says, comes out as UTF-8.
func ExampleHTML() {
	gbk := append([]byte(`<meta charset="gbk"><p>`), 0xc4, 0xe3, 0xba, 0xc3) // 你好
	utf8, err := charset.HTML(gbk, "text/html", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(utf8))
	// Output:
	// <meta charset="gbk"><p>你好
}
