package eslite

import "fmt"

// configureBucketScript reads bucket_script and bucket_selector: buckets_path (a map of
// names to paths, or one path, named _value), the script and gap_policy.
func (a *aggDef) configureBucketScript() error {
	for k := range a.opts {
		switch k {
		case "buckets_path", "script", "gap_policy", "format":
		default:
			return parsingErr("[%s] unknown field [%s]", a.kind, k)
		}
	}
	paths := map[string]string{}
	switch bp := a.opts["buckets_path"].(type) {
	case string:
		paths["_value"] = bp
	case map[string]any:
		for n, p := range bp {
			paths[n] = scalarString(p)
		}
	default:
		return parsingErr("Required parameter [buckets_path] not specified in [%s]", a.name)
	}
	if a.opts["script"] == nil {
		return parsingErr("Required parameter [script] not specified in [%s]", a.name)
	}
	src, params, err := scriptSource(a.opts["script"], a.kind)
	if err != nil {
		return err
	}
	vars := map[string]any{}
	for k, v := range params {
		vars[k] = v
	}
	for n := range paths {
		vars[n] = 1.0
	}
	if _, err := evalExpr(src, vars); err != nil {
		return badRequest("illegal_argument_exception", "[%s] aggregation [%s]: eslite cannot run the script [%s]: %v", a.kind, a.name, src, err)
	}
	a.scriptSrc, a.scriptParams, a.scriptPaths = src, params, paths
	return nil
}

// bucketScript runs a bucket_script (a value per bucket) or a bucket_selector (keeps
// the buckets its script accepts) over its parent's buckets. A bucket missing a value
// is skipped, or given 0 with gap_policy insert_zeros.
func (a *aggDef) bucketScript(buckets []any) ([]any, error) {
	var out []any
	for _, b := range buckets {
		bm := b.(map[string]any)
		vars := map[string]any{}
		for k, v := range a.scriptParams {
			vars[k] = v
		}
		gap := false
		for n, path := range a.scriptPaths {
			v, err := bucketMetric(bm, path, path, a.name)
			if err != nil {
				return nil, err
			}
			if v == nil {
				if scalarString(orDefault(a.opts["gap_policy"], "skip")) != "insert_zeros" {
					gap = true
					break
				}
				zero := 0.0
				v = &zero
			}
			vars[n] = *v
		}
		if gap {
			out = append(out, bm)
			continue
		}
		r, err := evalExpr(a.scriptSrc, vars)
		if err != nil {
			return nil, badRequest("illegal_argument_exception", "[%s] aggregation [%s]: %v", a.kind, a.name, err)
		}
		if a.kind == "bucket_selector" {
			keep, ok := r.(bool)
			if !ok {
				return nil, badRequest("illegal_argument_exception", "bucket_selector script must return a boolean, got [%v]", r)
			}
			if keep {
				out = append(out, bm)
			}
			continue
		}
		f, ok := toFloat(r)
		if !ok {
			return nil, badRequest("illegal_argument_exception", "[%s] script must return a number, got [%s]", a.name, fmt.Sprint(r))
		}
		res := map[string]any{"value": f}
		if fm, ok := a.opts["format"].(string); ok {
			res["value_as_string"] = decimalFormat(f, fm)
		}
		bm[a.name] = res
		out = append(out, bm)
	}
	return out, nil
}
