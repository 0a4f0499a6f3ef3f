package eslite

import (
	"encoding/json"
	"strings"
)

// filterPath applies a response's filter_path parameter: comma-separated dotted paths
// whose segments may hold * (any characters of one key) or be ** (any number of keys);
// a path starting with - excludes what it names. Only what an inclusion names is kept
// (everything, when there are only exclusions), less what an exclusion names; arrays
// are transparent, and a response left empty is {}.
func filterPath(v any, param string) any {
	var incl, excl [][]string
	for _, p := range strings.Split(param, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(p, "-"); ok {
			excl = append(excl, strings.Split(rest, "."))
		} else {
			incl = append(incl, strings.Split(p, "."))
		}
	}
	if len(incl) == 0 && len(excl) == 0 {
		return v
	}
	// Work on the JSON form, so any response value filters the same way.
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var generic any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return v
	}
	out, ok := filterValue(generic, incl, len(incl) == 0, excl)
	if !ok {
		return map[string]any{}
	}
	return out
}

// filterValue keeps what the inclusion paths (or, with all, everything) name and the
// exclusion paths do not; ok is false when nothing is left.
func filterValue(v any, incl [][]string, all bool, excl [][]string) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			nextExcl, excluded := stepPaths(excl, k)
			if excluded {
				continue
			}
			nextIncl, included := stepPaths(incl, k)
			if !all && !included && len(nextIncl) == 0 {
				continue
			}
			if r, ok := filterValue(x, nextIncl, all || included, nextExcl); ok {
				out[k] = r
			}
		}
		return out, len(out) > 0 || (all && len(t) == 0)
	case []any:
		out := []any{}
		for _, x := range t {
			if r, ok := filterValue(x, incl, all, excl); ok {
				out = append(out, r)
			}
		}
		return out, len(out) > 0 || (all && len(t) == 0)
	}
	return v, all
}

// stepPaths moves the paths past one key: the rest of each path the key matches the
// head of (done when one ends there), and every ** path, which may take more keys.
func stepPaths(paths [][]string, key string) (next [][]string, done bool) {
	for _, p := range paths {
		if len(p) == 0 {
			continue
		}
		if p[0] == "**" {
			next = append(next, p)
			rest, d := stepPaths([][]string{p[1:]}, key)
			if d || len(p) == 1 {
				done = true
			}
			next = append(next, rest...)
			continue
		}
		if globMatch(p[0], key) {
			if len(p) == 1 {
				done = true
			} else {
				next = append(next, p[1:])
			}
		}
	}
	return next, done
}
