package crawl

import (
	"slices"

	"gopkg.in/yaml.v3"
)

// ChangesKafka is the carrier of a step's change events (`changes: kafka`): for every
// record dedup judges changed, a message naming the fields that changed with their old
// and new values, and for every page of a recrawl step that is gone (404, 410), one
// saying so for each record it held (internal/changes).
const ChangesKafka = "kafka"

// ChangesTopic is the Kafka topic change events go to, for every biz and tenant: the
// message key names both.
const ChangesTopic = "trawler.changes"

// changes reads a step's `changes:`.
func (l *loader) changes(v *yaml.Node, where string) (string, int) {
	c := l.str(v, "changes")
	if c != "" && c != ChangesKafka {
		l.add(v.Line, "%s: changes %q: the one carrier is kafka; write `changes: kafka` (change events go to the Kafka topic %s), or leave it out", where, c, ChangesTopic)
		return "", v.Line
	}
	return c, v.Line
}

// checkChanges checks what a step's change events are made from: the previous version
// of a changed record, which HBase keeps, and dedup's changed verdicts.
func (l *loader) checkChanges(c *Chain, s Step, where string) {
	if s.Changes == "" {
		return
	}
	store := s.Store
	if store == nil {
		store = c.Defaults.Store
	}
	if !slices.Contains(store, "hbase") && !slices.Contains(store, StoreAll) {
		l.add(s.ChangesLine, "%s: changes: kafka reads the old values of a changed record from its previous version in HBase; add hbase to the step's store (store: [jsonl, hbase]), or store: [all] on a worker with --hbase", where)
	}
	mode := s.Dedup
	if mode == "" {
		mode = c.Defaults.Dedup
	}
	if mode != "" && mode != DedupChanged {
		l.add(s.ChangesLine, "%s: changes: kafka reports the records dedup judges changed, and with dedup: %s a changed record is not stored; set `dedup: changed` on the step", where, mode)
	}
}
