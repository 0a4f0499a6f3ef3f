package yamltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// api is one REST API of the suite, from Elasticsearch's rest-api-spec: its method and
// its URL forms, most specific first. A form is used when every {part} is given.
type api struct {
	method   string
	paths    []string
	required []string
	ndjson   bool // the body is a list of lines (bulk, msearch)
}

var apis = map[string]api{
	"info":                   {method: "GET", paths: []string{"/"}},
	"ping":                   {method: "HEAD", paths: []string{"/"}},
	"bulk":                   {method: "POST", paths: []string{"/{index}/_bulk", "/_bulk"}, ndjson: true},
	"msearch":                {method: "POST", paths: []string{"/{index}/_msearch", "/_msearch"}, ndjson: true},
	"count":                  {method: "POST", paths: []string{"/{index}/_count", "/_count"}},
	"search":                 {method: "POST", paths: []string{"/{index}/_search", "/_search"}},
	"get":                    {method: "GET", paths: []string{"/{index}/_doc/{id}"}, required: []string{"index", "id"}},
	"get_source":             {method: "GET", paths: []string{"/{index}/_source/{id}"}, required: []string{"index", "id"}},
	"exists":                 {method: "HEAD", paths: []string{"/{index}/_doc/{id}"}, required: []string{"index", "id"}},
	"exists_source":          {method: "HEAD", paths: []string{"/{index}/_source/{id}"}, required: []string{"index", "id"}},
	"index":                  {method: "PUT", paths: []string{"/{index}/_doc/{id}", "/{index}/_doc"}, required: []string{"index"}},
	"create":                 {method: "PUT", paths: []string{"/{index}/_create/{id}"}, required: []string{"index", "id"}},
	"delete":                 {method: "DELETE", paths: []string{"/{index}/_doc/{id}"}, required: []string{"index", "id"}},
	"update":                 {method: "POST", paths: []string{"/{index}/_update/{id}"}, required: []string{"index", "id"}},
	"mget":                   {method: "POST", paths: []string{"/{index}/_mget", "/_mget"}},
	"explain":                {method: "POST", paths: []string{"/{index}/_explain/{id}"}, required: []string{"index", "id"}},
	"delete_by_query":        {method: "POST", paths: []string{"/{index}/_delete_by_query"}, required: []string{"index"}},
	"update_by_query":        {method: "POST", paths: []string{"/{index}/_update_by_query"}, required: []string{"index"}},
	"field_caps":             {method: "POST", paths: []string{"/{index}/_field_caps", "/_field_caps"}},
	"indices.create":         {method: "PUT", paths: []string{"/{index}"}, required: []string{"index"}},
	"indices.delete":         {method: "DELETE", paths: []string{"/{index}"}, required: []string{"index"}},
	"indices.get":            {method: "GET", paths: []string{"/{index}"}, required: []string{"index"}},
	"indices.exists":         {method: "HEAD", paths: []string{"/{index}"}, required: []string{"index"}},
	"indices.get_mapping":    {method: "GET", paths: []string{"/{index}/_mapping", "/_mapping"}},
	"indices.put_mapping":    {method: "PUT", paths: []string{"/{index}/_mapping"}, required: []string{"index"}},
	"indices.get_alias":      {method: "GET", paths: []string{"/{index}/_alias/{name}", "/_alias/{name}", "/{index}/_alias", "/_alias"}},
	"indices.exists_alias":   {method: "HEAD", paths: []string{"/{index}/_alias/{name}", "/_alias/{name}"}, required: []string{"name"}},
	"indices.put_alias":      {method: "PUT", paths: []string{"/{index}/_alias/{name}"}, required: []string{"index", "name"}},
	"indices.delete_alias":   {method: "DELETE", paths: []string{"/{index}/_alias/{name}"}, required: []string{"index", "name"}},
	"indices.update_aliases": {method: "POST", paths: []string{"/_aliases"}},
	"indices.refresh":        {method: "POST", paths: []string{"/{index}/_refresh", "/_refresh"}},
	"indices.flush":          {method: "POST", paths: []string{"/{index}/_flush", "/_flush"}},
	"indices.forcemerge":     {method: "POST", paths: []string{"/{index}/_forcemerge", "/_forcemerge"}},
	"indices.get_settings":   {method: "GET", paths: []string{"/{index}/_settings/{name}", "/{index}/_settings", "/_settings/{name}", "/_settings"}},
	"indices.put_settings":   {method: "PUT", paths: []string{"/{index}/_settings", "/_settings"}},
	"indices.close":          {method: "POST", paths: []string{"/{index}/_close"}, required: []string{"index"}},
	"indices.open":           {method: "POST", paths: []string{"/{index}/_open"}, required: []string{"index"}},
	"indices.stats":          {method: "GET", paths: []string{"/{index}/_stats/{metric}", "/{index}/_stats", "/_stats/{metric}", "/_stats"}},
	"indices.get_field_mapping": {method: "GET", paths: []string{"/{index}/_mapping/field/{fields}", "/_mapping/field/{fields}"},
		required: []string{"fields"}},
	"indices.put_template":              {method: "PUT", paths: []string{"/_template/{name}"}, required: []string{"name"}},
	"indices.get_template":              {method: "GET", paths: []string{"/_template/{name}", "/_template"}},
	"indices.delete_template":           {method: "DELETE", paths: []string{"/_template/{name}"}, required: []string{"name"}},
	"indices.exists_template":           {method: "HEAD", paths: []string{"/_template/{name}"}, required: []string{"name"}},
	"indices.put_index_template":        {method: "PUT", paths: []string{"/_index_template/{name}"}, required: []string{"name"}},
	"indices.get_index_template":        {method: "GET", paths: []string{"/_index_template/{name}", "/_index_template"}},
	"indices.delete_index_template":     {method: "DELETE", paths: []string{"/_index_template/{name}"}, required: []string{"name"}},
	"indices.exists_index_template":     {method: "HEAD", paths: []string{"/_index_template/{name}"}, required: []string{"name"}},
	"indices.analyze":                   {method: "POST", paths: []string{"/{index}/_analyze", "/_analyze"}},
	"cluster.health":                    {method: "GET", paths: []string{"/_cluster/health/{index}", "/_cluster/health"}},
	"ingest.put_pipeline":               {method: "PUT", paths: []string{"/_ingest/pipeline/{id}"}, required: []string{"id"}},
	"ingest.get_pipeline":               {method: "GET", paths: []string{"/_ingest/pipeline/{id}", "/_ingest/pipeline"}},
	"ingest.delete_pipeline":            {method: "DELETE", paths: []string{"/_ingest/pipeline/{id}"}, required: []string{"id"}},
	"cluster.put_settings":              {method: "PUT", paths: []string{"/_cluster/settings"}},
	"cluster.put_component_template":    {method: "PUT", paths: []string{"/_component_template/{name}"}, required: []string{"name"}},
	"cluster.get_component_template":    {method: "GET", paths: []string{"/_component_template/{name}", "/_component_template"}},
	"cluster.delete_component_template": {method: "DELETE", paths: []string{"/_component_template/{name}"}, required: []string{"name"}},
	"cluster.exists_component_template": {method: "HEAD", paths: []string{"/_component_template/{name}"}, required: []string{"name"}},
	"cluster.get_settings":              {method: "GET", paths: []string{"/_cluster/settings"}},
	"open_point_in_time":                {method: "POST", paths: []string{"/{index}/_pit"}, required: []string{"index", "keep_alive"}},
	"close_point_in_time":               {method: "DELETE", paths: []string{"/_pit"}},
}

var partRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// errParam is the client-side refusal `catch: param` expects: a required part is missing.
type errParam struct{ msg string }

func (e *errParam) Error() string { return e.msg }

func paramString(v any) string {
	switch t := v.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, x := range t {
			parts[i] = paramString(x)
		}
		return strings.Join(parts, ",")
	case bool:
		return strconv.FormatBool(t)
	case json.Number:
		return t.String()
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// buildRequest turns an API call of the suite into an HTTP request.
func (x *exec) buildRequest(name string, params map[string]any, headers map[string]string) (*http.Request, error) {
	a, ok := apis[name]
	if !ok {
		return nil, fmt.Errorf("api [%s] is not known to the runner", name)
	}
	for _, req := range a.required {
		if _, ok := params[req]; !ok {
			return nil, &errParam{"missing required parameter [" + req + "] of [" + name + "]"}
		}
	}
	var body any
	hasBody := false
	if b, ok := params["body"]; ok {
		body, hasBody = b, true
	}
	used := map[string]bool{"body": true}
	path := ""
	for _, p := range a.paths {
		all := true
		for _, m := range partRE.FindAllStringSubmatch(p, -1) {
			if _, ok := params[m[1]]; !ok {
				all = false
			}
		}
		if !all {
			continue
		}
		path = partRE.ReplaceAllStringFunc(p, func(s string) string {
			k := s[1 : len(s)-1]
			used[k] = true
			return url.PathEscape(paramString(params[k]))
		})
		break
	}
	if path == "" {
		return nil, &errParam{"no URL form of [" + name + "] fits the given parameters"}
	}
	q := url.Values{}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if used[k] || k == "ignore" {
			continue
		}
		q.Set(k, paramString(params[k]))
	}
	u := x.r.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	method := a.method
	if name == "index" {
		if _, ok := params["id"]; !ok {
			method = "POST"
		}
	}
	var rd io.Reader
	contentType := "application/json"
	if hasBody {
		var buf bytes.Buffer
		switch t := body.(type) {
		case string:
			buf.WriteString(t)
			if a.ndjson && !strings.HasSuffix(t, "\n") {
				buf.WriteByte('\n')
			}
		case []any:
			if a.ndjson {
				for _, line := range t {
					if s, ok := line.(string); ok {
						buf.WriteString(s)
					} else {
						b, err := json.Marshal(line)
						if err != nil {
							return nil, err
						}
						buf.Write(b)
					}
					buf.WriteByte('\n')
				}
				break
			}
			b, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			buf.Write(b)
		default:
			b, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			buf.Write(b)
		}
		if a.ndjson {
			contentType = "application/x-ndjson"
		}
		rd = &buf
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return nil, err
	}
	if hasBody {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

var catchStatus = map[string]int{"bad_request": 400, "unauthorized": 401, "forbidden": 403, "missing": 404,
	"request_timeout": 408, "conflict": 409, "gone": 410, "unavailable": 503}

// requestCatch reports whether status is what `catch: request` expects: an error other
// than those the named catches stand for (400, 401, 403, 404, 408, 409, 410), as
// Elasticsearch's DoSection decides.
func requestCatch(status int) bool {
	switch status {
	case 400, 401, 403, 404, 408, 409, 410:
		return false
	}
	return status >= 400
}

func (x *exec) do(m map[string]any) error {
	catch := ""
	if c, ok := m["catch"]; ok {
		catch = fmt.Sprint(c)
	}
	headers := map[string]string{}
	var apiName string
	var params map[string]any
	for k, v := range m {
		switch k {
		case "catch", "warnings", "allowed_warnings", "warnings_regex", "allowed_warnings_regex":
		case "headers":
			for hk, hv := range asMap(x.resolve(v)) {
				headers[hk] = fmt.Sprint(hv)
			}
		case "node_selector":
			return fmt.Errorf("node_selector is not supported")
		default:
			if apiName != "" {
				return fmt.Errorf("more than one api in one do: [%s] and [%s]", apiName, k)
			}
			apiName = k
			params = asMap(x.resolve(v))
			if params == nil {
				params = map[string]any{}
			}
		}
	}
	if apiName == "" {
		return fmt.Errorf("do names no api")
	}
	ignore := map[int]bool{}
	for _, s := range strings.Split(paramString(params["ignore"]), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			ignore[n] = true
		}
	}
	req, err := x.buildRequest(apiName, params, headers)
	if err != nil {
		if _, isParam := err.(*errParam); isParam && catch == "param" {
			return nil
		}
		return err
	}
	if catch == "param" {
		return fmt.Errorf("expected a client-side parameter error, but [%s] was sent", apiName)
	}
	resp, err := x.r.client().Do(req)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	x.status = resp.StatusCode
	if req.Method == http.MethodHead {
		x.body = resp.StatusCode < 300
	} else if len(bytes.TrimSpace(raw)) == 0 {
		x.body = nil
	} else {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			x.body = string(raw)
		} else {
			x.body = v
		}
	}
	failed := resp.StatusCode >= 400 && !(req.Method == http.MethodHead && resp.StatusCode == 404)
	switch {
	case catch == "":
		if failed && !ignore[resp.StatusCode] {
			return fmt.Errorf("%s %s: status %d: %s", req.Method, req.URL.RequestURI(), resp.StatusCode, clip(raw))
		}
	case catch == "request":
		if !requestCatch(resp.StatusCode) {
			return fmt.Errorf("expected a 4xx or 5xx error other than 400, 401, 403, 404, 408, 409 and 410, got %d: %s", resp.StatusCode, clip(raw))
		}
	case strings.HasPrefix(catch, "/"):
		if resp.StatusCode < 400 {
			return fmt.Errorf("expected an error matching %s, got status %d: %s", catch, resp.StatusCode, clip(raw))
		}
		// As in DoSection: the response has an `error`, and the pattern (a plain Java
		// one, without match's COMMENTS flag) is found in its Java string form,
		// {root_cause=[...], type=..., reason=...}, not in the JSON.
		re, err := regexp.Compile("(?s)" + strings.TrimSuffix(strings.TrimPrefix(catch, "/"), "/"))
		if err != nil {
			return err
		}
		errText, ok := javaErrorString(raw)
		if !ok {
			return fmt.Errorf("expected an error matching %s, but status %d has no [error]: %s", catch, resp.StatusCode, clip(raw))
		}
		if !re.MatchString(errText) {
			return fmt.Errorf("error %s does not match %s (status %d)", clip([]byte(errText)), catch, resp.StatusCode)
		}
	default:
		want, ok := catchStatus[catch]
		if !ok {
			return fmt.Errorf("unknown catch [%s]", catch)
		}
		if resp.StatusCode != want {
			return fmt.Errorf("expected status %d (%s), got %d: %s", want, catch, resp.StatusCode, clip(raw))
		}
	}
	return nil
}

func clip(b []byte) string {
	s := string(b)
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// javaErrorString renders the `error` of a response body the way Java's Map.toString
// prints it in Elasticsearch's test framework: keys in the response's order, k=v pairs
// joined by ", " in braces, lists in brackets, strings bare.
func javaErrorString(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return "", false
		}
		if k == "error" {
			var b strings.Builder
			if err := writeJava(dec, &b); err != nil {
				return "", false
			}
			return b.String(), b.String() != "null"
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

func writeJava(dec *json.Decoder, b *strings.Builder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := t.(type) {
	case json.Delim:
		open, close := "{", "}"
		if v == '[' {
			open, close = "[", "]"
		}
		b.WriteString(open)
		for first := true; dec.More(); first = false {
			if !first {
				b.WriteString(", ")
			}
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				fmt.Fprintf(b, "%v=", k)
			}
			if err := writeJava(dec, b); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteString(close)
	case nil:
		b.WriteString("null")
	default:
		fmt.Fprint(b, v)
	}
	return nil
}
