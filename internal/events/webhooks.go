package events

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Webhook is one receiver of events: every event of its tenant (or of one chain of
// it) whose type is in Events (all when empty) is POSTed to URL. The secret that signs
// the body is never stored: SecretEnv names the environment variable of the deliverer
// process that holds it.
type Webhook struct {
	URL       string   `json:"url"`
	Tenant    string   `json:"tenant,omitempty"` // "": every tenant (only --alert-webhook)
	Chain     string   `json:"chain,omitempty"`  // "": every chain of the tenant
	SecretEnv string   `json:"secret_env,omitempty"`
	Events    []string `json:"events,omitempty"`
	Format    string   `json:"format,omitempty"` // "" (the event as JSON) or "slack"
	// Source says where the webhook was configured: "chain" (the chain file's
	// notify:, replaced by the chain's next run), "cli" (`trawler webhook add`) or
	// "flag" (--alert-webhook).
	Source string `json:"source,omitempty"`
}

// FormatSlack posts `{"text": "..."}`, which Slack's incoming webhooks (and Mattermost,
// Discord's /slack endpoints) show as a message. FormatAlert posts the alert JSON that
// --alert-webhook posted before events existed, so its receivers keep working.
const (
	FormatSlack = "slack"
	FormatAlert = "alert"
)

// Check returns what is wrong with w's settings, each with its fix, or nil.
func (w Webhook) Check() []string {
	var bad []string
	if b := crawl.CheckWebhookURL(w.URL); b != "" {
		bad = append(bad, b)
	}
	for _, t := range w.Events {
		if !slices.Contains(Types, t) {
			bad = append(bad, fmt.Sprintf("webhook event %q is not an event type%s; the types are %s", t, crawl.Suggest(t, Types), strings.Join(Types, ", ")))
		}
	}
	if w.Format != "" && w.Format != FormatSlack {
		bad = append(bad, fmt.Sprintf("webhook format %q: use `format: slack`, or leave it out for the event as JSON", w.Format))
	}
	return bad
}

// wants reports whether w receives e.
func (w Webhook) wants(e Event) bool {
	return (w.Tenant == "" || w.Tenant == e.Tenant) && (w.Chain == "" || w.Chain == e.Chain) &&
		(len(w.Events) == 0 || slices.Contains(w.Events, e.Type))
}

// id names a webhook within the registry: its scope and URL.
func (w Webhook) id() string { return w.Tenant + "/" + w.Chain + " " + w.URL }

// Shown is the webhook's URL as it may be printed or logged: its credentials masked.
func (w Webhook) Shown() string { return crawl.RedactURL(w.URL) }

// Webhooks is the Redis hash of the configured webhooks: field = scope and URL,
// value = the Webhook as JSON (with the name of its secret's variable, not the secret).
const Webhooks = "trawler:webhooks"

// AddWebhook configures w (replacing a webhook of the same scope and URL).
func AddWebhook(ctx context.Context, rdb redis.UniversalClient, w Webhook) error {
	if bad := w.Check(); len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	w.Tenant = cmp.Or(w.Tenant, crawl.DefaultTenant)
	w.Source = cmp.Or(w.Source, "cli")
	b, _ := json.Marshal(w)
	return rdb.HSet(ctx, Webhooks, w.id(), b).Err()
}

// RemoveWebhook removes the webhook of this scope and URL; false when there was none.
func RemoveWebhook(ctx context.Context, rdb redis.UniversalClient, tenant, chain, rawURL string) (bool, error) {
	n, err := rdb.HDel(ctx, Webhooks, Webhook{Tenant: cmp.Or(tenant, crawl.DefaultTenant), Chain: chain, URL: rawURL}.id()).Result()
	return n > 0, err
}

// SetChainWebhooks replaces the webhooks a chain file configured (notify:) with ws:
// a chain's run calls it with the chain's current list, so a webhook taken out of the
// file stops receiving.
func SetChainWebhooks(ctx context.Context, rdb redis.UniversalClient, tenant, chain string, ws []Webhook) error {
	tenant = cmp.Or(tenant, crawl.DefaultTenant)
	all, err := ListWebhooks(ctx, rdb)
	if err != nil {
		return err
	}
	pipe := rdb.TxPipeline()
	for _, w := range all {
		if w.Source == "chain" && w.Tenant == tenant && w.Chain == chain {
			pipe.HDel(ctx, Webhooks, w.id())
		}
	}
	for _, w := range ws {
		w.Tenant, w.Chain, w.Source = tenant, chain, "chain"
		b, _ := json.Marshal(w)
		pipe.HSet(ctx, Webhooks, w.id(), b)
	}
	_, err = pipe.Exec(ctx)
	return err
}

// ListWebhooks returns the configured webhooks, by tenant, chain and URL.
func ListWebhooks(ctx context.Context, rdb redis.UniversalClient) ([]Webhook, error) {
	m, err := rdb.HGetAll(ctx, Webhooks).Result()
	if err != nil {
		return nil, fmt.Errorf("read webhooks from Redis hash %s: %w", Webhooks, err)
	}
	out := make([]Webhook, 0, len(m))
	for _, v := range m {
		var w Webhook
		if json.Unmarshal([]byte(v), &w) == nil {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	return out, nil
}

// Signature headers. SignatureHeader is "sha256=" and the hex HMAC-SHA256, keyed by
// the webhook's secret, of TimestampHeader's value, ".", and the body: a receiver
// recomputes it and refuses a timestamp older than a few minutes, so a captured
// request cannot be replayed later.
const (
	SignatureHeader = "X-Trawler-Signature"
	TimestampHeader = "X-Trawler-Timestamp"
	EventIDHeader   = "X-Trawler-Event-Id"
	EventTypeHeader = "X-Trawler-Event"
)

// Sign returns the SignatureHeader value for body sent at unix time ts.
func Sign(secret []byte, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// secret reads the webhook's secret from the deliverer's environment; nil when it has
// none (the POST goes unsigned).
func (w Webhook) secret() []byte {
	if w.SecretEnv == "" {
		return nil
	}
	return []byte(os.Getenv(w.SecretEnv))
}

// body is what w receives for e.
func (w Webhook) body(e Event) []byte {
	switch w.Format {
	case FormatSlack:
		b, _ := json.Marshal(map[string]string{"text": Text(e)})
		return b
	case FormatAlert:
		b, _ := json.Marshal(alertOf(e))
		return b
	}
	b, _ := json.Marshal(e)
	return b
}

// Text is an event as one line a person reads: `trawler events tail` and Slack.
func Text(e Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", e.At.Format("2006-01-02 15:04:05Z"), e.Type)
	scope := e.Tenant
	if e.Chain != "" {
		scope += "/" + e.Chain
	}
	fmt.Fprintf(&b, " %s", scope)
	if e.RunID != "" {
		fmt.Fprintf(&b, " run %s", e.RunID)
	}
	if e.Step != "" {
		fmt.Fprintf(&b, " step %s", e.Step)
	}
	if e.By != "" {
		fmt.Fprintf(&b, " by %s", e.By)
	}
	for _, k := range slices.Sorted(maps.Keys(e.Detail)) {
		fmt.Fprintf(&b, " %s=%v", k, e.Detail[k])
	}
	return b.String()
}

// Alert is the JSON --alert-webhook posted before events, kept for its receivers:
// "alert" is backlog, failure_rate, outage or run_ended, "resolved" marks a recovery.
type Alert struct {
	Alert      string     `json:"alert"`
	Tenant     string     `json:"tenant"`
	Chain      string     `json:"chain"`
	RunID      string     `json:"run_id,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Dependency string     `json:"dependency,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Cause      string     `json:"cause,omitempty"`
	Value      float64    `json:"value"`
	Threshold  float64    `json:"threshold"`
	Resolved   bool       `json:"resolved,omitempty"`
	At         time.Time  `json:"at"`
}

// alertOf is e as the old alert: a run's end is run_ended with its failed inputs as
// the value, a resolution is its condition's name with resolved set.
func alertOf(e Event) Alert {
	a := Alert{Alert: e.Type, Tenant: e.Tenant, Chain: e.Chain, RunID: e.RunID, At: e.At}
	num := func(k string) float64 { f, _ := e.Detail[k].(float64); return f }
	str := func(k string) string { s, _ := e.Detail[k].(string); return s }
	if name, ok := strings.CutSuffix(e.Type, "_resolved"); ok {
		a.Alert, a.Resolved = name, true
	}
	switch e.Type {
	case RunFinished, RunFailed:
		a.Alert, a.Outcome, a.Value = "run_ended", str("outcome"), num("failed")
	default:
		a.Value, a.Threshold, a.Dependency, a.Cause = num("value"), num("threshold"), str("dependency"), str("cause")
		if t, err := time.Parse(time.RFC3339Nano, str("since")); err == nil {
			a.Since = &t
		}
	}
	return a
}
