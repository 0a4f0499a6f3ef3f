package external

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Kind is a kind of external resource, as tasks name it in Needs.
type Kind string

// The resources a task may need. Sign is not pooled: it names the site's signer.
const (
	Proxy     Kind = "proxy"
	UserAgent Kind = "user_agent"
	Cookie    Kind = "cookie"
	DeviceID  Kind = "device_id"
	Sign      Kind = "sign"
)

// Pooled lists the kinds kept in pools, in the order a lease takes them.
var Pooled = []Kind{Cookie, DeviceID, Proxy, UserAgent}

// Kinds lists every kind a task may need.
var Kinds = append(slices.Clone(Pooled), Sign)

// ParseKind checks a kind name, naming the valid ones when it is unknown.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown resource %q%s; resources: %s", s, crawl.Suggest(s, names), strings.Join(names, ", "))
}

// Resource is one pooled item: a proxy URL, a user-agent string, a Cookie header value
// or a device id.
type Resource struct {
	ID    string `json:"id"`
	Value string `json:"value"`
	// Attrs bind the item to others: a cookie's "user_agent" and "device_id" are sent with
	// it instead of pooled ones, because the site ties its session to them.
	Attrs   map[string]string `json:"attrs,omitempty"`
	Added   time.Time         `json:"added"`
	Expires time.Time         `json:"expires,omitzero"`
}

// Scope names the pools a request draws from.
type Scope struct {
	Tenant string
	Site   string
	Needs  []Kind
}

func (s Scope) needs(k Kind) bool { return slices.Contains(s.Needs, k) }

// ScopeOf turns a task's declared needs into a scope, rejecting unknown names.
func ScopeOf(tenant, site string, needs []string) (Scope, error) {
	s := Scope{Tenant: tenant, Site: site}
	for _, n := range needs {
		k, err := ParseKind(n)
		if err != nil {
			return Scope{}, err
		}
		s.Needs = append(s.Needs, k)
	}
	return s, nil
}

// Outcome is what became of a request made with leased resources.
type Outcome int

const (
	// Released returns items without judging them (a 404 says nothing about a cookie).
	Released Outcome = iota
	// Success counts for the items' health.
	Success
	// Failed is a strike (a proxy that could not connect); BanAfter strikes ban it.
	Failed
	// Banned: the site refused the item; it cools down, and is dropped after DropAfter bans.
	Banned
	// Throttled: the item was used too often; it rests for the verdict's Wait.
	Throttled
)

func (o Outcome) String() string {
	return [...]string{"released", "success", "failed", "banned", "throttled"}[o]
}

// WaitError says a request cannot be made until a pool has a free item. The engine
// retries the input later (crawl.RetryDelay gives the suggested wait); it never counts
// as a failure of the input.
type WaitError struct {
	Kind   Kind
	Tenant string
	Site   string
	Size   int           // items in the pool; 0 when it is empty
	After  time.Duration // when the first item is free again; 0 when unknown
}

func (e *WaitError) Error() string {
	what := "empty; fill it with a farming chain (store: [pool:" + string(e.Kind) + "]) or `trawler pool add " + string(e.Kind) + "`"
	if e.Size > 0 {
		what = fmt.Sprintf("all %d items are in use, cooling down or banned", e.Size)
		if e.After > 0 {
			what += fmt.Sprintf("; the first is free in %s", e.After.Round(100*time.Millisecond))
		}
	}
	return fmt.Sprintf("waiting for pool %s (tenant %s, site %s): %s", e.Kind, e.Tenant, e.Site, what)
}

// IsWaiting reports whether err is (or wraps) a WaitError.
func IsWaiting(err error) bool {
	var w *WaitError
	return errors.As(err, &w)
}

// Lender lends what a request's scope needs; Pools implements it.
type Lender interface {
	Lend(ctx context.Context, s Scope) (*Lease, error)
}
