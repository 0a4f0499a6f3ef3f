package eslite

// typedKeys renames aggregation results as Elasticsearch does under typed_keys=true:
// "<type>#<name>", the type being the result's (sterms, lterms, dterms for terms on
// keyword, whole-number and decimal fields; tdigest_percentiles; simple_value for the
// single-value pipelines; ...), so typed clients know how to decode each. Sub-aggregations
// inside buckets are renamed too.
func typedKeys(defs []*aggDef, out map[string]any) {
	for _, a := range defs {
		v, ok := out[a.name]
		if !ok {
			continue
		}
		delete(out, a.name)
		out[aggTypeName(a)+"#"+a.name] = v
		if len(a.subs) > 0 {
			typedSubs(a.subs, v)
		}
	}
}

// typedSubs renames the sub-aggregations of one result: directly under it (single-bucket
// aggregations) or under each of its buckets, listed or keyed.
func typedSubs(subs []*aggDef, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	switch b := m["buckets"].(type) {
	case []any:
		for _, x := range b {
			if bm, ok := x.(map[string]any); ok {
				typedKeys(subs, bm)
			}
		}
	case map[string]any:
		for _, x := range b {
			if bm, ok := x.(map[string]any); ok {
				typedKeys(subs, bm)
			}
		}
	default:
		typedKeys(subs, m)
	}
}

// aggTypeName is the name Elasticsearch writes before '#' for an aggregation's result.
func aggTypeName(a *aggDef) string {
	prefix := map[string]string{"text": "s", "keyword": "s", "long": "l", "date": "l", "boolean": "l", "double": "d"}[a.fi.Type]
	switch a.kind {
	case "terms":
		if prefix == "" {
			return "umterms"
		}
		return prefix + "terms"
	case "rare_terms":
		if prefix == "" {
			return "umrareterms"
		}
		return prefix + "rareterms"
	case "significant_terms", "significant_text":
		if prefix == "" || prefix == "d" {
			return "umsigterms"
		}
		return "sig" + prefix + "terms"
	case "percentiles", "percentile_ranks":
		method := "tdigest_"
		if _, hdr := a.opts["hdr"].(map[string]any); hdr {
			method = "hdr_"
		}
		return method + a.kind
	case "avg_bucket", "sum_bucket", "cumulative_sum", "bucket_script", "moving_fn", "serial_diff":
		return "simple_value"
	case "max_bucket", "min_bucket":
		return "bucket_metric_value"
	case "diversified_sampler":
		return "sampler"
	}
	return a.kind
}
