package crawl

import (
	"slices"
	"strings"
)

// checkPools says what is wrong with a step's `needs:` and `pool_site:`. A task of one
// site leases from and stores into that site's pools; a task that crawls any site
// (generic.*) has no site of its own, so a step that leases or farms with one names
// the site, and the farming step and the steps that lease agree on it.
func (l *loader) checkPools(s Step, spec TaskSpec, known bool, where string) {
	var kinds []string // what a worker pools: the kinds of its pool: sinks
	for _, sink := range l.opts.Sinks {
		if k, ok := strings.CutPrefix(sink, "pool:"); ok {
			kinds = append(kinds, k)
		}
	}
	for _, n := range s.Needs {
		if len(kinds) > 0 && !slices.Contains(kinds, n) {
			l.add(s.NeedsLine, "%s: needs: unknown resource %q%s; a step leases %s", where, n, Suggest(n, kinds), strings.Join(kinds, ", "))
		}
	}
	farms := false
	for _, st := range s.Store {
		farms = farms || strings.HasPrefix(st, "pool:")
	}
	switch {
	case s.PoolSite != "" && !bizPartRE.MatchString(s.PoolSite):
		l.add(s.PoolSiteLine, "%s: pool_site %q: write the site's name in lowercase letters, digits and _, e.g. shop", where, s.PoolSite)
	case s.PoolSite != "" && len(s.Needs) == 0 && !farms:
		l.add(s.PoolSiteLine, "%s: pool_site %s names the pools the step leases from (needs: [cookie]) or stores into (store: [pool:cookie]), and it does neither; add one or remove pool_site", where, s.PoolSite)
	case s.PoolSite == "" && len(s.Needs) > 0:
		l.add(s.NeedsLine, "%s: needs: name the site whose pools the step leases from: pool_site: shop, the same as the step that fills them (store: [pool:%s])", where, s.Needs[0])
	case s.PoolSite == "" && farms && known && spec.Login:
		l.add(s.Line, "%s: task %s keeps a session of one site: name it, pool_site: shop, and give the steps that use the session needs: [cookie] and the same pool_site", where, s.Task)
	}
}
