package eslite

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// plainText is an answer written as text/plain instead of JSON (the _cat APIs).
type plainText string

// catTable is the answer of a _cat API before it is written: columns and rows of strings.
type catTable struct {
	cols  []string
	right map[string]bool // columns aligned right in text, as Elasticsearch aligns numbers
	rows  [][]string
}

// catAPI serves /_cat/indices, /_cat/count, /_cat/aliases and /_cat/health with the
// parameters people type: v (header row), h (columns), s (sort, col:desc), format=json
// and bytes=b.
func (s *server) catAPI(r *http.Request, parts []string) (int, any, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return 0, nil, unsupported(r)
	}
	if len(parts) == 1 {
		return 200, plainText("=^.^=\n/_cat/indices\n/_cat/indices/{index}\n/_cat/count\n/_cat/count/{index}\n/_cat/aliases\n/_cat/aliases/{alias}\n/_cat/health\n"), nil
	}
	expr := ""
	if len(parts) == 3 {
		expr = parts[2]
	} else if len(parts) > 3 {
		return 0, nil, unsupported(r)
	}
	var tab *catTable
	var err error
	switch parts[1] {
	case "indices":
		tab, err = s.catIndices(r, expr)
	case "count":
		tab, err = s.catCount(r, expr)
	case "aliases":
		tab = s.catAliases(expr)
	case "health":
		tab = s.catHealth()
	default:
		return 0, nil, badRequest("illegal_argument_exception", "eslite does not support [/_cat/%s] (supported: indices, count, aliases, health)", parts[1])
	}
	if err != nil {
		return 0, nil, err
	}
	return tab.render(r.URL.Query())
}

func (s *server) catIndices(r *http.Request, expr string) (*catTable, error) {
	if expr == "" {
		expr = "_all"
	}
	ixs, err := s.resolveExpr(expr, optsFor(r, expandOpen|expandClosed))
	if err != nil {
		return nil, err
	}
	human := r.URL.Query().Get("bytes") != "b"
	tab := &catTable{
		cols:  []string{"health", "status", "index", "uuid", "pri", "rep", "docs.count", "docs.deleted", "store.size", "pri.store.size", "dataset.size"},
		right: map[string]bool{"pri": true, "rep": true, "docs.count": true, "docs.deleted": true, "store.size": true, "pri.store.size": true, "dataset.size": true},
	}
	for _, ix := range ixs {
		m := ix.snapshotMeta()
		st := flattenSettings(m.Settings)
		rep := "1"
		if v, ok := st["number_of_replicas"]; ok {
			rep = fmt.Sprint(v)
		}
		size := byteSize(dirSize(ix.dir), human)
		if m.Closed {
			tab.rows = append(tab.rows, []string{"green", "close", ix.name, "eslite-" + ix.name, strconv.Itoa(ix.shards()), rep, "", "", "", "", ""})
			continue
		}
		n, _ := ix.bi.DocCount()
		tab.rows = append(tab.rows, []string{"green", "open", ix.name, "eslite-" + ix.name, strconv.Itoa(ix.shards()), rep,
			strconv.FormatUint(n, 10), "0", size, size, size})
	}
	return tab, nil
}

func (s *server) catCount(r *http.Request, expr string) (*catTable, error) {
	if expr == "" {
		expr = "_all"
	}
	sub := r.Clone(r.Context())
	sub.URL = &url.URL{Path: "/" + expr + "/_count"}
	_, out, err := s.count(sub, expr, nil)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	n := fmt.Sprint(out.(map[string]any)["count"])
	return &catTable{cols: []string{"epoch", "timestamp", "count"}, right: map[string]bool{"epoch": true, "count": true},
		rows: [][]string{{strconv.FormatInt(now.Unix(), 10), now.Format("15:04:05"), n}}}, nil
}

func (s *server) catAliases(names string) *catTable {
	sel := aliasSelector{}
	if names != "" {
		sel.parts = strings.Split(names, ",")
	}
	tab := &catTable{cols: []string{"alias", "index", "filter", "routing.index", "routing.search", "is_write_index"}}
	for _, ix := range s.resolve("_all") {
		m := ix.snapshotMeta()
		for _, name := range ix.aliasNames() {
			if !sel.match(name) {
				continue
			}
			a := m.Aliases[name]
			filter := "-"
			if a["filter"] != nil {
				filter = "*"
			}
			cell := func(k string) string {
				if v, ok := a[k]; ok && v != nil {
					return scalarString(v)
				}
				if v, ok := a["routing"]; ok && v != nil && k != "is_write_index" {
					return scalarString(v)
				}
				return "-"
			}
			tab.rows = append(tab.rows, []string{name, ix.name, filter, cell("index_routing"), cell("search_routing"), cell("is_write_index")})
		}
	}
	sort.SliceStable(tab.rows, func(i, j int) bool { return tab.rows[i][0] < tab.rows[j][0] })
	return tab
}

func (s *server) catHealth() *catTable {
	now := time.Now().UTC()
	n := strconv.Itoa(len(s.resolve("_all")))
	return &catTable{
		cols: []string{"epoch", "timestamp", "cluster", "status", "node.total", "node.data", "shards", "pri", "relo", "init",
			"unassign", "unassign.pri", "pending_tasks", "max_task_wait_time", "active_shards_percent"},
		right: map[string]bool{"epoch": true, "node.total": true, "node.data": true, "shards": true, "pri": true, "relo": true,
			"init": true, "unassign": true, "unassign.pri": true, "pending_tasks": true, "max_task_wait_time": true, "active_shards_percent": true},
		rows: [][]string{{strconv.FormatInt(now.Unix(), 10), now.Format("15:04:05"), "eslite", "green", "1", "1", n, n, "0", "0", "0", "0", "0", "-", "100.0%"}},
	}
}

// render writes the table as Elasticsearch's _cat does: columns chosen by h, rows sorted
// by s, then JSON (format=json: a list of objects of strings) or aligned text, with a
// header row under v.
func (t *catTable) render(q url.Values) (int, any, error) {
	idx := map[string]int{}
	for i, c := range t.cols {
		idx[c] = i
	}
	cols := t.cols
	if h := q.Get("h"); h != "" {
		cols = nil
		for _, c := range strings.Split(h, ",") {
			if _, ok := idx[strings.TrimSpace(c)]; !ok {
				return 0, nil, badRequest("illegal_argument_exception", "eslite's _cat has no column [%s] here (columns: %s)", c, strings.Join(t.cols, ", "))
			}
			cols = append(cols, strings.TrimSpace(c))
		}
	}
	if s := q.Get("s"); s != "" {
		keys := strings.Split(s, ",")
		for _, k := range keys {
			if _, ok := idx[strings.Split(k, ":")[0]]; !ok {
				return 0, nil, badRequest("illegal_argument_exception", "Unable to sort by unknown sort key `%s`", strings.Split(k, ":")[0])
			}
		}
		sort.SliceStable(t.rows, func(i, j int) bool {
			for _, k := range keys {
				name, dir, _ := strings.Cut(k, ":")
				a, b := t.rows[i][idx[name]], t.rows[j][idx[name]]
				if a == b {
					continue
				}
				less := a < b
				if x, err1 := strconv.ParseFloat(a, 64); err1 == nil {
					if y, err2 := strconv.ParseFloat(b, 64); err2 == nil {
						less = x < y
					}
				}
				if dir == "desc" {
					return !less
				}
				return less
			}
			return false
		})
	}
	switch f := q.Get("format"); f {
	case "json":
		out := []any{}
		for _, row := range t.rows {
			o := map[string]any{}
			for _, c := range cols {
				o[c] = row[idx[c]]
			}
			out = append(out, o)
		}
		return 200, out, nil
	case "", "txt", "text":
	default:
		return 0, nil, badRequest("illegal_argument_exception", "eslite's _cat answers format=json or text, not [%s]", f)
	}
	header := q.Has("v") && q.Get("v") != "false"
	width := map[string]int{}
	lines := t.rows
	if header {
		lines = append([][]string{t.cols}, t.rows...)
	}
	for _, row := range lines {
		for _, c := range cols {
			width[c] = max(width[c], len(row[idx[c]]))
		}
	}
	var sb strings.Builder
	for li, row := range lines {
		var cells []string
		for _, c := range cols {
			cell := row[idx[c]]
			pad := strings.Repeat(" ", width[c]-len(cell))
			if t.right[c] && !(header && li == 0) {
				cells = append(cells, pad+cell)
			} else {
				cells = append(cells, cell+pad)
			}
		}
		sb.WriteString(strings.TrimRight(strings.Join(cells, " "), " "))
		sb.WriteString("\n")
	}
	return 200, plainText(sb.String()), nil
}

// dirSize is the bytes an index holds on disk.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// byteSize writes a size as Elasticsearch's human sizes (225b, 4.4kb, 10mb), or in bytes.
func byteSize(n int64, human bool) string {
	if !human {
		return strconv.FormatInt(n, 10)
	}
	units := []string{"b", "kb", "mb", "gb", "tb"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + units[u]
}
