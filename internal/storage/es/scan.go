package es

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Selection picks documents for Scan and CountSelected: a query-string query (empty:
// all), and optionally one run, one biz, and a first fetch time.
type Selection struct {
	Query string
	RunID string
	Biz   string
	Chain string
	Since time.Time
}

func (s Selection) query() map[string]any {
	var filter []any
	if strings.TrimSpace(s.Query) != "" {
		filter = append(filter, map[string]any{"query_string": map[string]any{"query": s.Query}})
	}
	if s.RunID != "" {
		filter = append(filter, map[string]any{"term": map[string]any{"run_id": s.RunID}})
	}
	if s.Biz != "" {
		filter = append(filter, map[string]any{"term": map[string]any{"biz": s.Biz}})
	}
	if s.Chain != "" {
		filter = append(filter, map[string]any{"term": map[string]any{"chain": s.Chain}})
	}
	if !s.Since.IsZero() {
		filter = append(filter, map[string]any{"range": map[string]any{"ts": map[string]any{"gte": s.Since.UTC().Format(time.RFC3339Nano)}}})
	}
	if len(filter) == 0 {
		return map[string]any{"match_all": map[string]any{}}
	}
	return map[string]any{"bool": map[string]any{"filter": filter}}
}

// CountSelected is how many documents of index the selection matches.
func CountSelected(ctx context.Context, c *Client, index string, sel Selection) (int64, error) {
	body, _ := json.Marshal(map[string]any{"query": sel.query()})
	res, err := c.Count(c.Count.WithContext(ctx), c.Count.WithIndex(IndexPath(index)...), c.Count.WithBody(bytes.NewReader(body)))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if res.IsError() {
		return 0, fmt.Errorf("count %s: %s", index, readError(res))
	}
	var out struct {
		Count int64 `json:"count"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("count %s: %w", index, err)
	}
	return out.Count, nil
}

// Scan streams every document of index the selection matches to fn, page by page
// (pageSize hits, default 500) sorted by biz and key, each page asking for the hits
// after the last one (search_after). It needs neither scroll nor point-in-time, so it
// works on eslite; a document written meanwhile may or may not be seen, one deleted
// meanwhile is skipped, and none is seen twice.
func Scan(ctx context.Context, c *Client, index string, sel Selection, pageSize int, fn func(crawl.Item) error) error {
	if pageSize <= 0 {
		pageSize = 500
	}
	var after []any
	for {
		body := map[string]any{
			"query":            sel.query(),
			"size":             pageSize,
			"sort":             []any{map[string]any{"biz": "asc"}, map[string]any{"key": "asc"}},
			"track_total_hits": false,
		}
		if after != nil {
			body["search_after"] = after
		}
		b, _ := json.Marshal(body)
		res, err := c.Search(c.Search.WithContext(ctx), c.Search.WithIndex(IndexPath(index)...), c.Search.WithBody(bytes.NewReader(b)))
		if err != nil {
			return err
		}
		if res.StatusCode == http.StatusNotFound {
			res.Body.Close()
			return nil
		}
		if res.IsError() {
			e := readError(res)
			res.Body.Close()
			return fmt.Errorf("search %s: %s", index, e)
		}
		var out struct {
			Hits struct {
				Hits []struct {
					Source json.RawMessage `json:"_source"`
					Sort   []any           `json:"sort"`
				} `json:"hits"`
			} `json:"hits"`
		}
		dec := json.NewDecoder(res.Body)
		dec.UseNumber()
		err = dec.Decode(&out)
		res.Body.Close()
		if err != nil {
			return fmt.Errorf("search %s: decode: %w", index, err)
		}
		for _, h := range out.Hits.Hits {
			var it crawl.Item
			d := json.NewDecoder(bytes.NewReader(h.Source))
			d.UseNumber()
			if err := d.Decode(&it); err != nil {
				return fmt.Errorf("search %s: decode a document: %w", index, err)
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(out.Hits.Hits) < pageSize {
			return nil
		}
		after = out.Hits.Hits[len(out.Hits.Hits)-1].Sort
		if len(after) == 0 {
			return fmt.Errorf("search %s: hits carry no sort values to page after", index)
		}
	}
}
