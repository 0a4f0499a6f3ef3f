package generic

import (
	"reflect"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// Two chains running generic.html_detail store under biz of their own, each with the
// schema its `fields:` declare; an explicit `biz:` overrides, and a bad one is refused
// with the file, line and fix.
func TestConfigStepsStoreUnderTheirOwnBiz(t *testing.T) {
	chain := func(name, priceType string) *crawl.Plan {
		t.Helper()
		yaml := "name: " + name + `
steps:
  - id: Detail-Page
    task: generic.html_detail
    params:
      urls: [http://shop.test/p/1]
      fields:
        name: h1
        price: {css: .price, type: ` + priceType + `}
        tags: {css: .tag, type: list}
  - id: again
    task: generic.html_detail
    biz: shop.products
    params: {urls: [http://shop.test/p/2], fields: {name: h1}}
`
		c, err := crawl.Load(name+".yaml", []byte(yaml), crawl.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Compile(nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := chain("shop-a", "float"), chain("shop_b", "string")
	if a.Steps[0].Biz != "shop_a.detail_page" || b.Steps[0].Biz != "shop_b.detail_page" || a.Steps[1].Biz != "shop.products" {
		t.Errorf("biz %q, %q, %q; want shop_a.detail_page, shop_b.detail_page, shop.products", a.Steps[0].Biz, b.Steps[0].Biz, a.Steps[1].Biz)
	}
	want := []crawl.Field{{Name: "name"}, {Name: "price", Type: crawl.Float}, {Name: "tags", Type: crawl.List}}
	if !reflect.DeepEqual(a.Steps[0].Output, want) {
		t.Errorf("schema %+v, want %+v", a.Steps[0].Output, want)
	}
	if b.Steps[0].Output[1].Type != crawl.String {
		t.Errorf("chain b's price is %q, want string", b.Steps[0].Output[1].Type)
	}

	for _, c := range []struct{ yaml, want string }{
		{"name: shop\nsteps:\n  - id: d\n    task: generic.html_detail\n    biz: Shop-Detail\n    params: {urls: [http://x.test/], fields: {name: h1}}\n",
			`shop.yaml:5: step "d": biz: "Shop-Detail" is no biz: write site.task, two parts of lowercase letters, digits and _ (e.g. shop.detail)`},
		{"name: shop\nsteps:\n  - id: d\n    task: generic.html_detail\n    biz: generic.json\n    params: {urls: [http://x.test/], fields: {name: h1}}\n",
			"shop.yaml:5: step \"d\": biz: generic.json is where task generic.json stores its records; pick a biz of this chain's own, e.g. shop.d"},
		{"name: shop\nsteps:\n  - id: d.1\n    task: generic.html_detail\n    params: {urls: [http://x.test/], fields: {name: h1}}\n",
			"shop.yaml:3: step \"d.1\" stores its records under shop.<step id>, and \"d.1\" is no biz part (lowercase letters, digits, - and _); rename the step, or set `biz: site.task` on it"},
	} {
		_, err := crawl.Load("shop.yaml", []byte(c.yaml), crawl.LoadOptions{})
		if err == nil || err.Error() != c.want {
			t.Errorf("got  %v\nwant %s", err, c.want)
		}
	}
}
