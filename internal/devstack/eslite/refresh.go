package eslite

import "net/url"

// Refreshes. Writes are searchable as soon as they are acknowledged, except on an index
// whose refresh_interval is -1: there searches (and gets with realtime=false) see the
// documents as they were at the last refresh (_refresh, or a write with refresh=true
// or wait_for). A document changed since then is hidden until the next refresh rather
// than shown as it was, since eslite keeps no old versions.

// refreshNow makes every write so far visible.
func (ix *esIndex) refreshNow() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.refreshed = ix.meta.SeqNo - 1
}

// visibleUpTo is the last sequence number searches see, and whether the index limits
// them to it (refresh_interval -1).
func (ix *esIndex) visibleUpTo() (int64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if scalarString(flattenSettings(ix.meta.Settings)["refresh_interval"]) != "-1" {
		return 0, false
	}
	return ix.refreshed, true
}

// refreshParam applies a write's refresh parameter: true and wait_for refresh the
// index, and true reports forced_refresh.
func refreshParam(q url.Values, out map[string]any, ixs ...*esIndex) {
	v, ok := q["refresh"]
	if !ok || (v[0] != "" && v[0] != "true" && v[0] != "wait_for") {
		return
	}
	for _, ix := range ixs {
		ix.refreshNow()
	}
	if out != nil && v[0] != "wait_for" {
		out["forced_refresh"] = true
	}
}
