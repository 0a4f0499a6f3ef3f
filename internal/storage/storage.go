// Package storage defines the sinks a chain step stores its items in. Each sink writes
// idempotently: storing the same item of the same run twice (a retried batch) leaves one
// record — or, for a log that keeps every copy (Kafka, see AtLeastOnce), repeats that
// carry the same item id. Sink packages live below this one (jsonl, file, kafka, mongo;
// hbase and es plug in the same way).
package storage

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/trawlerhq/trawler/crawl"
)

// Sink stores items.
type Sink interface {
	// Name is what chain files use in `store:`.
	Name() string
	// Write stores a batch. It returns only when the batch is durable in the sink, or an
	// error, in which case the caller retries the whole batch.
	Write(ctx context.Context, items []crawl.Item) error
	// Count reads back how many records of a run the sink holds (for summaries and tests).
	Count(ctx context.Context, runID string) (int, error)
	Close() error
}

// AtLeastOnce is implemented by sinks that keep every copy of a record they are sent
// (a log such as Kafka) instead of one per key. A write that fails half-way is retried
// with the whole batch, so such a sink may hold repeats; the batch activity gives the
// resent items the ids they had, so consumers drop repeats by id.
type AtLeastOnce interface {
	AtLeastOnce()
}

// Schemas is implemented by sinks whose layout follows the schema of a biz (an
// Elasticsearch mapping). Before a step writes, it declares the schema of its biz when
// that is not a registered task's (a config-driven step's `fields:`), so two chains
// running one task each get a layout of their own.
type Schemas interface {
	Declare(biz string, fields []crawl.Field)
}

// FailureLog records inputs that were given up on, with their cause, so nothing is lost
// silently.
type FailureLog interface {
	WriteFailures(ctx context.Context, runID string, failures []crawl.Failure) error
}

// Set is the sinks a worker can write to, by name.
type Set map[string]Sink

// Names lists the sink names, sorted.
func (s Set) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get returns the named sink, or an error naming the available ones.
func (s Set) Get(name string) (Sink, error) {
	if k, ok := s[name]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("sink %q is not configured on this worker (configured: %s)", name, strings.Join(s.Names(), ", "))
}

// Close closes every sink.
func (s Set) Close() error {
	var first error
	for _, n := range s.Names() {
		if err := s[n].Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// TenantKey is the id of tenant's record key in a store that keys records by one string
// (the MongoDB _id, the Elasticsearch _id, the Kafka message key). No key of one tenant
// maps to the id of another tenant's key, whatever the key holds:
//
//   - another tenant's id is "@" + tenant + ":" + key. Tenant names are lowercase
//     letters, digits, - and _ (crawl checks them), never empty, never holding ":", so
//     the tenant is everything between the "@" and the first ":".
//   - the default tenant's id is the bare key, as records were stored before tenants had
//     their own, unless the key itself starts with "@": then it is "@:" + key. No
//     other tenant's id starts with "@:" (its name is not empty), and no bare id starts
//     with "@", so a key read off a site such as "@acme:k1" cannot pose as acme's k1.
//
// SplitTenantKey is its inverse.
func TenantKey(tenant, key string) string {
	if crawl.IsDefaultTenant(tenant) {
		if strings.HasPrefix(key, tenantMark) {
			return tenantMark + ":" + key
		}
		return key
	}
	return tenantMark + tenant + ":" + key
}

// tenantMark starts every TenantKey id that is not a bare key.
const tenantMark = "@"

// SplitTenantKey returns the tenant and key of an id TenantKey made; the tenant of a
// bare key, or of an id no TenantKey makes, is the default one.
func SplitTenantKey(id string) (tenant, key string) {
	if rest, ok := strings.CutPrefix(id, tenantMark); ok {
		if tenant, key, ok := strings.Cut(rest, ":"); ok {
			return cmp.Or(tenant, crawl.DefaultTenant), key
		}
	}
	return crawl.DefaultTenant, id
}
