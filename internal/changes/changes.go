// Package changes tells other systems what a crawl found changed: the change events of
// the steps with `changes: kafka`, on the Kafka topic crawl.ChangesTopic.
//
// # Events
//
// One topic for every biz and tenant; the message key is `<biz>/<record key>` (the
// record key as storage.TenantKey writes it: "@tenant:key" for a tenant other than the
// default), so every event of one record lands in one partition, in order. The value
// is JSON:
//
//	{"type":"changed","key":"demo:story:5","biz":"demo.story","tenant":"default",
//	 "run_id":"…","step":"story","at":"2026-03-01T00:10:00Z",
//	 "fields":{"title":{"old":"The quiet parser","new":"The quiet parser (updated)"}}}
//
// for a record dedup judged changed, with exactly the fields whose value differs ("old"
// left out for a field the record did not have, "new" for one it no longer has), and
//
//	{"type":"removed","key":"demo:story:7","biz":"demo.story","tenant":"default",
//	 "run_id":"…","step":"story","at":"…","url":"http://…/item/7","status":404}
//
// for each record of a page a recrawl step found gone (404 or 410).
//
// # Where old values come from, and what they cost
//
// Dedup keeps 12 bits of a record's content hash, not its values. The old values are
// the record's previous version in HBase, which keeps them all: after the step's
// stores are written, one HBase Get per changed record reads its newest versions (at
// most 3, so a copy a retried write left is skipped) and the fields are compared as
// the JSON HBase holds. Per changed record that is one Get returning up to 3 versions
// of the row (3× the record's stored bytes at most) and one Kafka message of the
// changed fields. Unchanged and new records cost nothing. A step with `changes: kafka`
// must therefore store in hbase; the chain file says so when it does not.
//
// Removed events need the keys of the records a page held, which a recrawl plan (one
// sorted-set member per page) does not keep: for each page of a recrawl step with
// `changes: kafka` whose visit found something new or changed, one HSET notes its
// record keys in the Redis hash "chg:<tenant>:<biz>:pages" (about the page's URL and
// keys in bytes). A page gone before any such visit is reported with its URL alone.
//
// Delivery is at least once, as for the kafka store: a batch retried after the events
// were sent sends them again; drop repeats by key and `at`.
package changes

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/recrawl"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
)

// Event types.
const (
	Changed = "changed"
	Removed = "removed"
)

// Event is one change event, as the topic carries it.
type Event struct {
	Type   string           `json:"type"`
	Key    string           `json:"key,omitempty"`
	Biz    string           `json:"biz"`
	Tenant string           `json:"tenant"`
	RunID  string           `json:"run_id"`
	Step   string           `json:"step"`
	At     time.Time        `json:"at"`
	Fields map[string]Field `json:"fields,omitempty"`
	URL    string           `json:"url,omitempty"`
	Status int              `json:"status,omitempty"`
}

// Field is a field's value before and after, as JSON.
type Field struct {
	Old json.RawMessage `json:"old,omitempty"`
	New json.RawMessage `json:"new,omitempty"`
}

// Step is where events come from: a step of a run.
type Step struct {
	Tenant, Biz, RunID, ID string
}

// Publisher sends change events. Versions is the HBase store the steps write, Kafka
// the cluster the events go to, Pages the Redis that keeps the record keys of recrawl
// pages.
type Publisher struct {
	Versions *hbase.Sink
	Kafka    *kafka.Sink
	Pages    redis.UniversalClient
	Now      func() time.Time // the clock of removed events (nil: the wall clock)
}

// Changed sends one event for each record dedup judged changed, after the step's
// stores hold its new version.
func (p *Publisher) Changed(ctx context.Context, st Step, items []crawl.Item) error {
	var evs []Event
	for _, it := range items {
		fields, err := p.diff(ctx, it)
		if err != nil {
			return err
		}
		if len(fields) == 0 {
			continue // what HBase holds already reads as this version
		}
		evs = append(evs, Event{Type: Changed, Key: it.Key, Biz: it.Biz, Tenant: cmp.Or(it.Tenant, crawl.DefaultTenant),
			RunID: st.RunID, Step: st.ID, At: it.TS, Fields: fields})
	}
	return p.send(ctx, evs)
}

// diff compares an item with the newest version in HBase that reads differently (the
// newest is the one just written).
func (p *Publisher) diff(ctx context.Context, it crawl.Item) (map[string]Field, error) {
	now := make(map[string]json.RawMessage, len(it.Data))
	for k, v := range it.Data {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("changes: item %s field %s: %w", it.Key, k, err)
		}
		now[k] = b
	}
	var old map[string]json.RawMessage
	rec, err := p.Versions.History(ctx, it.Tenant, it.Biz, it.Key, 3)
	switch {
	case errors.Is(err, hbase.ErrNotFound):
	case err != nil:
		return nil, crawl.Dependency("store hbase", fmt.Errorf("changes: the previous version of %s %s: %w", it.Biz, it.Key, err))
	default:
		for _, v := range rec.Versions {
			if !maps.EqualFunc(v.Fields, now, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
				old = v.Fields
				break
			}
		}
	}
	fields := map[string]Field{}
	for k, v := range now {
		if o, ok := old[k]; !ok || !bytes.Equal(o, v) {
			fields[k] = Field{Old: o, New: v}
		}
	}
	for k, o := range old {
		if _, ok := now[k]; !ok {
			fields[k] = Field{Old: o}
		}
	}
	return fields, nil
}

// Page is a page a recrawl step visited and the keys of the records it yielded.
type Page struct {
	Input crawl.Input
	Keys  []string
}

// PagesKey is the Redis hash of a namespace's pages and their record keys.
func PagesKey(ns string) string { return "chg:" + ns + ":pages" }

func namespace(st Step) string { return st.Tenant + ":" + st.Biz }

// Remember notes the record keys of pages, for the removed events of their records.
func (p *Publisher) Remember(ctx context.Context, st Step, pages []Page) error {
	if len(pages) == 0 {
		return nil
	}
	values := make([]any, 0, 2*len(pages))
	for _, pg := range pages {
		values = append(values, recrawl.Member(pg.Input), strings.Join(pg.Keys, "\n"))
	}
	if err := p.Pages.HSet(ctx, PagesKey(namespace(st)), values...).Err(); err != nil {
		return crawl.Dependency("redis (changes)", fmt.Errorf("note the records of %d pages of step %s: %w", len(pages), st.ID, err))
	}
	return nil
}

// Gone is a page the site says is gone, with the status it answered.
type Gone struct {
	Input  crawl.Input
	Status int
}

// Removed sends one event for each record of the pages that are gone, then forgets
// the pages.
func (p *Publisher) Removed(ctx context.Context, st Step, gone []Gone) error {
	if len(gone) == 0 {
		return nil
	}
	members := make([]string, len(gone))
	for i, g := range gone {
		members[i] = recrawl.Member(g.Input)
	}
	ns := namespace(st)
	keys, err := p.Pages.HMGet(ctx, PagesKey(ns), members...).Result()
	if err != nil {
		return crawl.Dependency("redis (changes)", fmt.Errorf("read the records of %d gone pages of step %s: %w", len(gone), st.ID, err))
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	at := now().UTC()
	var evs []Event
	for i, g := range gone {
		ev := Event{Type: Removed, Biz: st.Biz, Tenant: cmp.Or(st.Tenant, crawl.DefaultTenant), RunID: st.RunID, Step: st.ID,
			At: at, URL: crawl.StripUserinfo(g.Input.URL), Status: g.Status}
		s, _ := keys[i].(string)
		if s == "" {
			evs = append(evs, ev)
			continue
		}
		for _, k := range strings.Split(s, "\n") {
			ev.Key = k
			evs = append(evs, ev)
		}
	}
	if err := p.send(ctx, evs); err != nil {
		return err
	}
	if err := p.Pages.HDel(ctx, PagesKey(ns), members...).Err(); err != nil {
		return crawl.Dependency("redis (changes)", fmt.Errorf("forget %d gone pages of step %s: %w", len(gone), st.ID, err))
	}
	return nil
}

// send writes events to the topic, keyed by biz and record.
func (p *Publisher) send(ctx context.Context, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	msgs := make([]kafkago.Message, len(evs))
	for i, ev := range evs {
		value, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("changes: encode the event of %s %s: %w", ev.Biz, ev.Key, err)
		}
		msgs[i] = kafkago.Message{Key: []byte(MessageKey(ev)), Value: value, Time: ev.At}
	}
	if err := p.Kafka.Publish(ctx, crawl.ChangesTopic, msgs); err != nil {
		return crawl.Dependency("kafka (changes)", err)
	}
	return nil
}

// MessageKey is an event's message key: its biz and record (or page, for a removed
// page whose records are not known).
func MessageKey(ev Event) string {
	return ev.Biz + "/" + storage.TenantKey(ev.Tenant, cmp.Or(ev.Key, ev.URL))
}
