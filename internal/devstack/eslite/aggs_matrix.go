package eslite

import (
	"math"
)

func (a *aggDef) configureMatrixStats(fields map[string]fieldInfo) error {
	for k := range a.opts {
		if k != "fields" && k != "mode" && k != "missing" {
			return parsingErr("[matrix_stats] unknown field [%s]", k)
		}
	}
	names := clauses(a.opts["fields"])
	if len(names) == 0 {
		return parsingErr("Required [fields] in [matrix_stats] aggregation [%s]", a.name)
	}
	for _, x := range names {
		f := scalarString(x)
		fi := mappedOrUnmapped(fields, f)
		if fi.Type != "long" && fi.Type != "double" && fi.Type != "date" && fi.Type != "unmapped" {
			return badRequest("illegal_argument_exception", "Field [%s] of type [%s] is not supported for aggregation [matrix_stats]", f, fi.ESType)
		}
		a.topMetrics = append(a.topMetrics, &aggDef{name: f, field: f, fi: fi})
	}
	return nil
}

// checkMatrixFields refuses matrix_stats over fields some searched index lacks, as
// Elasticsearch does.
func checkMatrixFields(defs []*aggDef, ixs []*esIndex) error {
	for _, a := range defs {
		if a.kind == "matrix_stats" {
			for _, ix := range ixs {
				fm := ix.fieldMap()
				for _, f := range a.topMetrics {
					if _, ok := fm[f.name]; !ok {
						return badRequest("illegal_argument_exception", "Aggregation [%s]  all fields must exist in all indices.", a.name)
					}
				}
			}
		}
		if err := checkMatrixFields(a.subs, ixs); err != nil {
			return err
		}
	}
	return nil
}

// matrixStats computes, over the documents that have a value in every field, each
// field's count, mean, sample variance, skewness and kurtosis, and the sample
// covariance and correlation of every pair of fields.
func (a *aggDef) matrixStats(docs []map[string]any) map[string]any {
	fs := a.topMetrics
	var rows [][]float64
	for _, d := range docs {
		row := make([]float64, len(fs))
		ok := true
		for i, f := range fs {
			vals := f.values(d)
			if len(vals) == 0 {
				ok = false
				break
			}
			row[i], _ = toFloat(vals[0])
		}
		if ok {
			rows = append(rows, row)
		}
	}
	n := float64(len(rows))
	if n == 0 {
		return map[string]any{"doc_count": 0}
	}
	means := make([]float64, len(fs))
	for i := range fs {
		col := make([]float64, len(rows))
		for r, row := range rows {
			col[r] = row[i]
		}
		means[i] = compensatedSum(col) / n
	}
	moment := func(i, j int) float64 {
		s := 0.0
		for _, row := range rows {
			s += (row[i] - means[i]) * (row[j] - means[j])
		}
		return s
	}
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	javaHashOrder(names)
	index := map[string]int{}
	for i, f := range fs {
		index[f.name] = i
	}
	out := []any{}
	for _, name := range names {
		i := index[name]
		var m2, m3, m4 float64
		for _, row := range rows {
			d := row[i] - means[i]
			m2, m3, m4 = m2+d*d, m3+d*d*d, m4+d*d*d*d
		}
		cov, cor := map[string]any{}, map[string]any{}
		for j, g := range fs {
			c := moment(i, j) / (n - 1)
			cov[g.name] = c
			cor[g.name] = c / math.Sqrt(moment(i, i)/(n-1)*moment(j, j)/(n-1))
		}
		out = append(out, map[string]any{"name": name, "count": len(rows), "mean": means[i], "variance": m2 / (n - 1),
			"skewness": (m3 / n) / math.Pow(m2/n, 1.5), "kurtosis": (m4 / n) / ((m2 / n) * (m2 / n)), "covariance": cov, "correlation": cor})
	}
	return map[string]any{"doc_count": len(rows), "fields": out}
}
