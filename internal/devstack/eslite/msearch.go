package eslite

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// msearch runs the searches of an _msearch body: header and body lines in pairs. Each
// search answers for itself (a failing one gets its error and status in its slot); a
// request Elasticsearch validates as a whole (a point in time with indexes) fails
// whole.
func (s *server) msearch(r *http.Request, expr string, body []byte) (int, any, error) {
	start := time.Now()
	type pair struct {
		header map[string]any
		body   []byte
	}
	var pairs []pair
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var header map[string]any
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if header == nil {
			h, err := decodeObject(line)
			if err != nil {
				return 0, nil, err
			}
			header = h
			continue
		}
		pairs = append(pairs, pair{header, append([]byte(nil), line...)})
		header = nil
	}
	var problems []string
	for i, p := range pairs {
		b, _ := decodeObject(p.body)
		if _, hasPIT := b["pit"]; hasPIT && (p.header["index"] != nil || expr != "_all") {
			problems = append(problems, strconv.Itoa(i+1)+": [indices] cannot be used with point in time")
		}
	}
	if len(problems) > 0 {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: %s;", strings.Join(problems, ";"))
	}
	responses := []any{}
	for _, p := range pairs {
		target := expr
		q := url.Values{}
		for _, k := range []string{"rest_total_hits_as_int", "typed_keys"} {
			if v := r.URL.Query().Get(k); v != "" {
				q.Set(k, v)
			}
		}
		for k, v := range p.header {
			switch k {
			case "index", "indices":
				names := clauses(v)
				parts := make([]string, len(names))
				for i, n := range names {
					parts[i] = scalarString(n)
				}
				target = strings.Join(parts, ",")
			default:
				q.Set(k, scalarString(v))
			}
		}
		sub := r.Clone(r.Context())
		sub.URL = &url.URL{Path: "/" + target + "/_search", RawQuery: q.Encode()}
		status, out, err := s.search(sub, target, p.body)
		if err != nil {
			ee := asESError(err)
			res := ee.body()
			responses = append(responses, res)
			continue
		}
		m, _ := out.(map[string]any)
		m["status"] = status
		responses = append(responses, m)
	}
	return 200, map[string]any{"took": time.Since(start).Milliseconds(), "responses": responses}, nil
}
