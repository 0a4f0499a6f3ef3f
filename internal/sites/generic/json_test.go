package generic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// api serves 7 records in pages of 3 (0-based offsets underneath) in four paging styles.
func api(t *testing.T) string {
	record := func(i int) map[string]any {
		r := map[string]any{
			"id":    i,
			"name":  fmt.Sprintf("rec-%d", i),
			"price": strconv.Itoa(i*100) + ".50", // a number in a string
			"stock": i%2 == 0,
			"meta":  map[string]any{"created": 1700000000 + i, "tags": []string{"t" + strconv.Itoa(i), "all"}},
			"link":  fmt.Sprintf("/things/%d", i),
		}
		if i == 2 {
			r["name"] = nil
			delete(r, "meta")
		}
		return r
	}
	slice := func(off, n int) []any {
		out := []any{}
		for i := off + 1; i <= min(off+n, 7); i++ {
			out = append(out, record(i))
		}
		return out
	}
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	return site(t, map[string]any{
		"/pages": func(w http.ResponseWriter, r *http.Request) {
			p, _ := strconv.Atoi(r.URL.Query().Get("page"))
			if p == 0 {
				p = 1
			}
			write(w, map[string]any{"data": map[string]any{"items": slice((p-1)*3, 3)}, "meta": map[string]any{"has_more": p*3 < 7}})
		},
		"/offset": func(w http.ResponseWriter, r *http.Request) {
			off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
			write(w, slice(off, 3))
		},
		"/cursor": func(w http.ResponseWriter, r *http.Request) {
			c := r.URL.Query().Get("after")
			off, _ := strconv.Atoi(strings.TrimPrefix(c, "c"))
			next := "c" + strconv.Itoa(off+3)
			if off+3 >= 7 {
				next = "c" + strconv.Itoa(off) // a buggy API repeats its last cursor
			}
			write(w, map[string]any{"results": slice(off, 3), "next": next})
		},
		"/links": func(w http.ResponseWriter, r *http.Request) {
			p, _ := strconv.Atoi(r.URL.Query().Get("p"))
			var next any
			if p < 3 {
				next = "links?p=" + strconv.Itoa(p+1) // relative
			}
			write(w, map[string]any{"items": slice(p*3, 3), "paging": map[string]any{"next": next}})
		},
		"/one":  typed("application/json; charset=utf-8", []byte("\xEF\xBB\xBF{\"id\": 9, \"name\": \"solo\"}")),
		"/html": typed("text/html", []byte("<html>not json</html>")),
	}).URL
}

const recordFields = `
fields:
  id: {path: id, type: int}
  name: name
  price: {path: price, type: float}
  stock: stock
  created: {path: meta.created, type: date, layout: unix}
  tags: {path: meta.tags, type: list}
  link: {path: link, type: url}
key: id
`

func TestJSONPaging(t *testing.T) {
	base := api(t)
	cases := []struct {
		name, params string
		visited      []string
	}{
		{"page", "urls: [/pages]\nitems: data.items\npage_param: page\nhas_more_path: meta.has_more", []string{"/pages?page=2", "/pages?page=3"}},
		{"offset until empty", "urls: ['/offset?offset=0']\noffset_param: offset", []string{"/offset?offset=3", "/offset?offset=6", "/offset?offset=7"}},
		{"cursor repeated", "urls: [/cursor]\nitems: results\ncursor_path: next\ncursor_param: after", []string{"/cursor?after=c3", "/cursor?after=c6"}},
		{"relative next links", "urls: ['/links?p=0']\nitems: items\nnext_path: paging.next", []string{"/links?p=1", "/links?p=2", "/links?p=3"}},
		{"max_pages", "urls: [/pages]\nitems: data.items\npage_param: page\nmax_pages: 2", []string{"/pages?page=2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := params(t, JSONTask, "base_url: "+base+"\n"+tc.params+recordFields)
			all, visited := follow(t, JSON, p, 10)
			var want []string
			for _, v := range tc.visited {
				want = append(want, base+v)
			}
			if !reflect.DeepEqual(visited, want) {
				t.Errorf("visited %v, want %v", visited, want)
			}
			wantItems := 7
			if tc.name == "max_pages" {
				wantItems = 6
			}
			if got := keys(all.Items); len(got) != wantItems || got[0] != "1" || got[len(got)-1] != strconv.Itoa(wantItems) {
				t.Errorf("keys %v, want 1..%d", got, wantItems)
			}
		})
	}
}

func TestJSONTypedFields(t *testing.T) {
	base := api(t)
	p := params(t, JSONTask, "urls: ["+base+"/pages]\nitems: data.items"+recordFields)
	res := mustRun(t, JSON, p, crawl.Input{})
	if len(res.Items) != 3 || len(res.Next) != 0 {
		t.Fatalf("%d items, next %v; want 3 and no paging", len(res.Items), res.Next)
	}
	wantData(t, "record 1", res.Items[0].Data, map[string]any{
		"id": int64(1), "name": "rec-1", "price": 100.5, "stock": false,
		"created": "2023-11-14T22:13:21Z", "tags": []any{"t1", "all"}, "link": base + "/things/1",
	})
	wantData(t, "record 2 (null name, no meta)", res.Items[1].Data, map[string]any{
		"id": int64(2), "name": nil, "price": 200.5, "stock": true, "created": nil, "tags": []any{}, "link": base + "/things/2",
	})
	// Without fields every key is stored as it is; a single object is one item.
	p = params(t, JSONTask, "urls: ["+base+"/one]")
	res = mustRun(t, JSON, p, crawl.Input{})
	if len(res.Items) != 1 || res.Items[0].Key != base+"/one#1" {
		t.Fatalf("items %+v", res.Items)
	}
	wantData(t, "whole object", res.Items[0].Data, map[string]any{"id": int64(9), "name": "solo"})
	// Empty results and non-JSON answers.
	p = params(t, JSONTask, "urls: ['"+base+"/offset?offset=50']")
	if res = mustRun(t, JSON, p, crawl.Input{}); len(res.Items) != 0 {
		t.Errorf("empty array: %+v", res.Items)
	}
	p = params(t, JSONTask, "urls: ["+base+"/html]")
	_, err := runTask(t, JSON, p, crawl.Input{})
	if want := "generic.json: " + base + `/html: the response is not JSON (it starts "<html>not json</html>")`; err == nil || err.Error() != want || !crawl.IsPermanent(err) {
		t.Errorf("not JSON: %v, want permanent %q", err, want)
	}
}

func TestJSONDetailLinks(t *testing.T) {
	base := api(t)
	p := params(t, JSONTask, "urls: ["+base+"/pages]\nitems: data.items\nfields: {link: {path: link, type: url}, id: id}\ndetail: link\ndetail_task: generic.json")
	res := mustRun(t, JSON, p, crawl.Input{})
	if got := urls(res.Next); !reflect.DeepEqual(got, []string{base + "/things/1", base + "/things/2", base + "/things/3"}) {
		t.Fatalf("detail inputs %v", got)
	}
	if res.Next[0].Task != JSONTask || res.Next[0].Var(VarVia) != "s" {
		t.Errorf("detail input %+v", res.Next[0])
	}
	// The same task as detail step: a list step consuming itself passes its own detail
	// inputs over, so they are fetched only by the detail step.
	if again, _ := runTask(t, JSON, p, res.Next[0]); len(again.Items)+len(again.Next) != 0 {
		t.Errorf("own detail input was processed: %+v", again)
	}
}
