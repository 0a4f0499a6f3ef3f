package generic

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/stream"
)

// StreamTask reads server-sent events or NDJSON through the process's stream hub.
const StreamTask = "generic.stream"

// Variables of a stream step's inputs to itself.
const (
	// VarPos is the position the next window resumes after (SSE Last-Event-ID, the
	// NDJSON position field).
	VarPos = "pos"
	// VarSkip counts the events without a position (malformed NDJSON lines) a window
	// took after VarPos, which the next one passes over.
	VarSkip = "skip"
	// VarReceived counts the items the subscription received so far, against `limit`.
	VarReceived = "received"
	// VarBad carries a malformed event's cause: the input fails with it, so the event
	// is recorded as a failure while the stream goes on.
	VarBad = "bad"
)

var streamSpec = crawl.TaskSpec{
	Name: StreamTask,
	Doc:  "a streaming source (server-sent events or NDJSON): subscribes with keywords and field matches, one window of events per input, resuming from the last position; subscriptions to one source share an upstream connection",
	Params: []crawl.Param{
		{Name: "url", Type: crawl.String, Required: true, Doc: "the stream's URL (absolute, or relative to base_url), without the keyword and position parameters"},
		baseURLParam,
		headersParam,
		{Name: "format", Type: crawl.String, Default: stream.SSE, Doc: "sse (text/event-stream: id:, retry:, resumes with Last-Event-ID) or ndjson (one JSON object a line)"},
		{Name: "keywords", Type: crawl.List, Doc: "keep events containing any of these words (any case) in match_fields; they go upstream in query_param, joined with the other subscriptions' of the same source"},
		{Name: "match", Type: crawl.Object, Doc: "field → value events must equal, e.g. {lang: en}; checked here, not upstream"},
		{Name: "match_fields", Type: crawl.List, Doc: "fields the keywords are looked for in; default: every text field"},
		{Name: "query_param", Type: crawl.String, Default: "q", Doc: "the URL parameter carrying the keywords, comma-separated; empty: the source is not filtered upstream"},
		{Name: "max_terms", Type: crawl.Int, Default: 0, Doc: "keywords one upstream connection may carry (the source's limit); subscriptions beyond it get another connection; 0: no limit"},
		{Name: "position_field", Type: crawl.String, Doc: "ndjson: the field holding an event's position (a sequence number, a timestamp)"},
		{Name: "position_param", Type: crawl.String, Default: "since", Doc: "ndjson: the URL parameter that resumes after a position"},
		{Name: "start", Type: crawl.String, Doc: "the position the first window resumes after (0: from the beginning, when the source keeps history); empty: live"},
		{Name: "key", Type: crawl.String, Doc: "the field whose value is the item key; default: the event's id or position"},
		{Name: "limit", Type: crawl.Int, Default: 0, Doc: "items this subscription receives before it unsubscribes and the step ends; 0: no limit (the chain's and tenant's item quotas still apply)"},
		{Name: "window_items", Type: crawl.Int, Default: 100, Doc: "events one window (one input) takes at most before it hands them on"},
		{Name: "window", Type: crawl.String, Default: "5s", Doc: "how long one window waits for events before it hands on what it has"},
		{Name: "grace", Type: crawl.String, Default: "30s", Doc: "how long the subscription stays subscribed with no window reading it (the chain ended, or this worker lost Temporal) before it leaves; the upstream connection closes with its last subscription"},
	},
	Output:  commonOutput,
	Timeout: 2 * time.Minute,
	Retries: 5,
	Check:   checker(buildStream),
}

// Stream is the generic.stream task.
var Stream = configTask(streamSpec, buildStream, runStream)

func init() { crawl.Register(Stream) }

type streamConfig struct {
	src        stream.Source
	filter     stream.Filter
	start, key string
	limit, max int
	window     time.Duration
}

func buildStream(p crawl.Params) (*streamConfig, []error) {
	c := &streamConfig{}
	com, errs := parseCommon(StreamTask, p)
	raw := str(p["url"])
	if raw == "" {
		errs = append(errs, errors.New("param url: missing; give the stream's URL, e.g. url: /stream/sse"))
	} else if u, err := absURL(com.base, raw); err != nil {
		errs = append(errs, fmt.Errorf("param url: %v", err))
	} else {
		c.src.URL = u
	}
	c.src.Header = com.headers
	switch f := strings.ToLower(str(p["format"])); f {
	case "", stream.SSE:
		c.src.Format = stream.SSE
	case stream.NDJSON:
		c.src.Format = stream.NDJSON
	default:
		errs = append(errs, fmt.Errorf("param format: %q is not a stream format; use sse or ndjson", f))
	}
	c.src.QueryParam = str(p["query_param"])
	c.src.PositionField = str(p["position_field"])
	c.src.PositionParam = str(p["position_param"])
	c.src.MaxTerms = intParam(p, "max_terms", 0)
	c.filter.Keywords = strList(p["keywords"])
	c.filter.Fields = strList(p["match_fields"])
	if m, ok := p["match"]; ok && m != nil {
		mm, ok := m.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("param match: want a mapping of field to value, like {lang: en}, got %s", describe(m)))
		} else {
			c.filter.Match = map[string]string{}
			for k, v := range mm {
				c.filter.Match[k] = str(v)
			}
		}
	}
	if c.src.MaxTerms > 0 && len(c.filter.Keywords) > c.src.MaxTerms {
		errs = append(errs, fmt.Errorf("param keywords: %d keywords, more than max_terms %d allows on one connection; split them over several steps or raise max_terms", len(c.filter.Keywords), c.src.MaxTerms))
	}
	c.start, c.key = str(p["start"]), str(p["key"])
	c.limit = intParam(p, "limit", 0)
	c.max = intParam(p, "window_items", 100)
	if c.max < 1 {
		errs = append(errs, fmt.Errorf("param window_items: %d; a window takes at least 1 event", c.max))
	}
	durations := map[string]*time.Duration{"window": &c.window, "grace": &c.src.Grace}
	for _, name := range []string{"window", "grace"} {
		d, err := time.ParseDuration(str(p[name]))
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("param %s: %q is not a duration; write one like 5s or 2m", name, str(p[name])))
		}
		*durations[name] = d
	}
	errs = append(errs, checkNonNegative(p, "limit", "max_terms")...)
	return c, errs
}

// runStream reads one window of the subscription and hands on its items and the input
// of the next window, which carries the position to resume after.
func runStream(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	if notMine(env, in) {
		return crawl.Result{}, nil
	}
	if cause := in.Var(VarBad); cause != "" {
		return crawl.Result{}, crawl.Permanentf("%s", cause)
	}
	c, err := configOf(env, StreamTask, buildStream)
	if err != nil {
		return crawl.Result{}, err
	}
	pos := c.start
	if _, ok := in.Vars[VarPos]; ok {
		pos = in.Var(VarPos)
	}
	received, _ := crawl.AsInt(in.Vars[VarReceived])
	skip, _ := crawl.AsInt(in.Vars[VarSkip])
	if c.limit > 0 && received >= c.limit {
		return crawl.Result{}, nil
	}
	hub, err := stream.HubService.Of(env)
	if err != nil {
		return crawl.Result{}, err
	}
	info := stream.Info{Chain: env.Chain, Run: env.RunID, Tenant: env.Tenant, Step: env.Step, Limit: c.limit}
	sub, err := hub.Attach(c.src, env.Tenant+"/"+env.RunID+"/"+env.Step, c.filter, pos, skip, info, received)
	if err != nil {
		return crawl.Result{}, crawl.Permanent(err)
	}
	want := c.max
	if c.limit > 0 {
		want = min(want, c.limit-received)
	}
	events, err := hub.Next(ctx, sub, want, time.Now().Add(c.window))
	if ctx.Err() != nil {
		// Cut short (timeout, cancelled): the retried input re-attaches at the same
		// position and gets these events again.
		return crawl.Result{}, ctx.Err()
	}
	_ = err // ErrGone: the events handed out are good; the next window resumes after them
	var res crawl.Result
	for _, ev := range events {
		if ev.ID != "" {
			pos, skip = ev.ID, 0
		} else {
			skip++
		}
		if ev.Err != "" {
			res.Next = append(res.Next, crawl.Input{Task: StreamTask, Vars: forSelf(env, map[string]any{
				VarBad: fmt.Sprintf("malformed event %s of %s: %s: %s", eventName(ev), c.src.URL, ev.Err, ev.Raw)})})
			continue
		}
		res.Items = append(res.Items, crawl.Item{Key: c.itemKey(ev), URL: c.src.URL, Data: ev.Obj})
	}
	received += len(res.Items)
	if c.limit > 0 && received >= c.limit {
		hub.Unsubscribe(sub) // the step ends here: no next window
		return res, nil
	}
	hub.Detach(sub, received)
	res.Next = append(res.Next, crawl.Input{Task: StreamTask, Vars: forSelf(env, map[string]any{VarPos: pos, VarSkip: skip, VarReceived: received})})
	return res, nil
}

// itemKey is the key field's value, else the event's position, else a hash of it.
func (c *streamConfig) itemKey(ev stream.Event) string {
	if c.key != "" {
		if v, ok := ev.Obj[c.key]; ok && v != nil {
			return str(v)
		}
	}
	if ev.ID != "" {
		return ev.ID
	}
	sum := sha1.Sum([]byte(fingerprint(ev.Obj)))
	return hex.EncodeToString(sum[:10])
}

func eventName(ev stream.Event) string {
	if ev.ID != "" {
		return "id " + ev.ID
	}
	return fmt.Sprintf("at line %d", ev.Line)
}
