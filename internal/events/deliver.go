package events

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
)

// Topic is the Kafka topic every event is produced to.
const Topic = "trawler.events"

// Group is the consumer group of the deliverers on Stream: each event goes to one of
// them, and an event a deliverer read but did not finish stays pending for the next.
const Group = "deliver"

// Producer sends a message to a Kafka topic and returns when the brokers have it: the
// kafka sink's Publish.
type Producer interface {
	Publish(ctx context.Context, topic string, msgs []kafkago.Message) error
}

// Deliverer sends every event of Stream to Kafka and to the webhooks that want it.
//
// Each receiver (Kafka, every webhook) has its own queue and goroutine, so a receiver
// that never answers holds up only its own events. A delivery is tried Attempts times,
// Backoff apart and doubling up to MaxBackoff, each attempt bounded by Timeout; after
// the last it goes to DeadStream. An event is acknowledged in the group once every
// receiver has it (or it is dead), so a deliverer that stops sends its unfinished
// events again when it starts: delivery is at least once, and a receiver drops a
// repeat by the event id (EventIDHeader).
type Deliverer struct {
	Redis  redis.UniversalClient
	Kafka  Producer  // nil: no Kafka topic
	Static []Webhook // receive every event besides the configured ones (--alert-webhook)
	// Consumer names this deliverer in the group (default: host name): one that
	// restarts under the same name takes its pending events back at once; another
	// takes over a stopped one's events after they were idle for Reclaim.
	Consumer string
	// Group is the consumer group (default Group); deliverers in different groups
	// each deliver every event.
	Group      string
	Attempts   int           // default 6
	Backoff    time.Duration // first wait between attempts (default 1 s)
	MaxBackoff time.Duration // longest wait (default 1 min)
	Timeout    time.Duration // one attempt (default 10 s)
	Reclaim    time.Duration // default 5 min
	Queue      int           // events waiting per receiver before more go dead (default 1000)
	// Poll is how long to wait after finding no new event (default 500 ms): the
	// stream is polled, not read blocking, as the embedded Redis of `trawler dev` serves
	// no blocking reads.
	Poll   time.Duration
	Log    *slog.Logger
	Client *http.Client

	mu       sync.Mutex
	queues   map[string]chan job
	wg       sync.WaitGroup
	hooks    []Webhook
	hooksAt  time.Time
	inFlight map[string]int // entry id → receivers still to finish it
}

// job is one event for one receiver; done reports it finished (sent or dead).
type job struct {
	e    Event
	w    Webhook // zero for Kafka
	done func()
}

const kafkaReceiver = "kafka"

func (d *Deliverer) defaults() {
	if d.Attempts <= 0 {
		d.Attempts = 6
	}
	d.Backoff = cmp.Or(d.Backoff, time.Second)
	d.MaxBackoff = cmp.Or(d.MaxBackoff, time.Minute)
	d.Timeout = cmp.Or(d.Timeout, 10*time.Second)
	d.Reclaim = cmp.Or(d.Reclaim, 5*time.Minute)
	d.Queue = cmp.Or(d.Queue, 1000)
	d.Group = cmp.Or(d.Group, Group)
	d.Poll = cmp.Or(d.Poll, 500*time.Millisecond)
	if d.Consumer == "" {
		d.Consumer, _ = os.Hostname()
		d.Consumer = cmp.Or(d.Consumer, "trawler")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Client == nil {
		d.Client = &http.Client{}
	}
	d.queues, d.inFlight = map[string]chan job{}, map[string]int{}
}

// Run delivers events until ctx ends, then waits for its receivers' goroutines.
func (d *Deliverer) Run(ctx context.Context) error {
	d.defaults()
	defer d.wg.Wait()
	err := d.Redis.XGroupCreateMkStream(ctx, Stream, d.Group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group %s on Redis stream %s: %w", d.Group, Stream, err)
	}
	// This consumer's own pending events first (a restart), then new ones.
	from := "0"
	lastReclaim := time.Time{}
	for ctx.Err() == nil {
		if time.Since(lastReclaim) > d.Reclaim/2 {
			d.reclaim(ctx)
			lastReclaim = time.Now()
		}
		res, err := d.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{Group: d.Group, Consumer: d.Consumer,
			Streams: []string{Stream, from}, Count: 100, Block: -1}).Result()
		if ctx.Err() != nil {
			break
		}
		if err != nil && err != redis.Nil {
			d.Log.Warn("events: read the stream", "stream", Stream, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		n := 0
		if len(res) == 0 || len(res[0].Messages) == 0 {
			sleep(ctx, d.Poll)
		}
		for _, s := range res {
			for _, m := range s.Messages {
				n++
				d.dispatch(ctx, m)
			}
		}
		if from != ">" { // going through the pending ones
			from = ">"
			if n > 0 {
				from = res[0].Messages[n-1].ID
			}
		}
	}
	return nil
}

// reclaim takes over events another deliverer read and left unfinished for Reclaim.
func (d *Deliverer) reclaim(ctx context.Context) {
	start := "0-0"
	for {
		msgs, next, err := d.Redis.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: Stream, Group: d.Group, Consumer: d.Consumer,
			MinIdle: d.Reclaim, Start: start, Count: 100}).Result()
		if err != nil {
			return
		}
		for _, m := range msgs {
			d.dispatch(ctx, m)
		}
		if next == "0-0" || len(msgs) == 0 {
			return
		}
		start = next
	}
}

// dispatch queues an event for each receiver that wants it.
func (d *Deliverer) dispatch(ctx context.Context, m redis.XMessage) {
	d.mu.Lock()
	_, busy := d.inFlight[m.ID]
	d.mu.Unlock()
	if busy { // read again while its receivers still work on it
		return
	}
	e, err := decode(m)
	if err != nil {
		d.Log.Warn("events: skip an unreadable event", "err", err)
		d.Redis.XAck(ctx, Stream, d.Group, m.ID)
		return
	}
	var targets []job
	if d.Kafka != nil {
		targets = append(targets, job{e: e})
	}
	for _, w := range append(d.webhooks(ctx), d.Static...) {
		if w.wants(e) {
			targets = append(targets, job{e: e, w: w})
		}
	}
	if len(targets) == 0 {
		d.Redis.XAck(ctx, Stream, d.Group, m.ID)
		return
	}
	d.mu.Lock()
	d.inFlight[m.ID] = len(targets)
	d.mu.Unlock()
	done := func() {
		d.mu.Lock()
		d.inFlight[m.ID]--
		last := d.inFlight[m.ID] == 0
		if last {
			delete(d.inFlight, m.ID)
		}
		d.mu.Unlock()
		if last {
			d.Redis.XAck(context.WithoutCancel(ctx), Stream, d.Group, m.ID)
		}
	}
	for _, j := range targets {
		j.done = done
		q := d.queue(ctx, j.w)
		select {
		case q <- j:
		default:
			d.dead(ctx, j, fmt.Errorf("%d events already wait for this receiver: it answers too slowly", d.Queue), 0)
		}
	}
}

// webhooks are the configured webhooks, read again every few seconds.
func (d *Deliverer) webhooks(ctx context.Context) []Webhook {
	if time.Since(d.hooksAt) < 5*time.Second {
		return d.hooks
	}
	ws, err := ListWebhooks(ctx, d.Redis)
	if err != nil {
		d.Log.Warn("events: read webhooks", "err", err)
		return d.hooks
	}
	d.hooks, d.hooksAt = ws, time.Now()
	return ws
}

// queue returns the receiver's queue, starting its goroutine on first use.
func (d *Deliverer) queue(ctx context.Context, w Webhook) chan job {
	id := kafkaReceiver
	if w.URL != "" {
		id = w.id()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	q, ok := d.queues[id]
	if !ok {
		q = make(chan job, d.Queue)
		d.queues[id] = q
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return // unfinished events stay pending in the group
				case j := <-q:
					d.deliver(ctx, j)
				}
			}
		}()
	}
	return q
}

// deliver tries one event on one receiver until it is sent or dead.
func (d *Deliverer) deliver(ctx context.Context, j job) {
	wait := d.Backoff
	var err error
	for attempt := 1; attempt <= d.Attempts; attempt++ {
		if err = d.send(ctx, j); err == nil {
			j.done()
			return
		}
		if ctx.Err() != nil {
			return
		}
		if attempt < d.Attempts {
			sleep(ctx, wait)
			wait = min(2*wait, d.MaxBackoff)
		}
	}
	if ctx.Err() == nil {
		d.dead(ctx, j, err, d.Attempts)
	}
}

// send is one attempt.
func (d *Deliverer) send(ctx context.Context, j job) error {
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	if j.w.URL == "" {
		value, _ := json.Marshal(j.e)
		key := []byte(storage.TenantKey(j.e.Tenant, cmp.Or(j.e.RunID, j.e.Chain, j.e.Type)))
		return d.Kafka.Publish(ctx, Topic, []kafkago.Message{{Key: key, Value: value}})
	}
	body := j.w.body(j.e)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "trawler-events")
	req.Header.Set(EventIDHeader, j.e.ID)
	req.Header.Set(EventTypeHeader, j.e.Type)
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	if secret := j.w.secret(); len(secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(secret, ts, body))
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// DeadLetter is a delivery that failed every attempt.
type DeadLetter struct {
	ID       string    `json:"id"`
	Event    Event     `json:"event"`
	Receiver string    `json:"receiver"` // "kafka", or the webhook's URL with its credentials masked
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	At       time.Time `json:"at"`
}

// dead records a delivery that will not be tried again, and finishes it.
func (d *Deliverer) dead(ctx context.Context, j job, cause error, attempts int) {
	receiver := kafkaReceiver
	if j.w.URL != "" {
		receiver = j.w.Shown()
	}
	dl := DeadLetter{Event: j.e, Receiver: receiver, Error: crawl.RedactText(cause.Error()), Attempts: attempts, At: time.Now().UTC()}
	b, _ := json.Marshal(dl)
	err := d.Redis.XAdd(context.WithoutCancel(ctx), &redis.XAddArgs{Stream: DeadStream, MaxLen: MaxDead, Approx: true, Values: []any{"dead", b}}).Err()
	d.Log.Warn("events: delivery failed for good", "event", j.e.ID, "type", j.e.Type, "receiver", receiver, "attempts", attempts, "err", dl.Error)
	if err != nil {
		d.Log.Warn("events: record a dead delivery", "stream", DeadStream, "err", err)
		return // left pending: the next start tries it again
	}
	j.done()
}

// Dead returns the newest n dead deliveries, oldest first.
func Dead(ctx context.Context, rdb redis.UniversalClient, n int) ([]DeadLetter, error) {
	msgs, err := rdb.XRevRangeN(ctx, DeadStream, "+", "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("read Redis stream %s: %w", DeadStream, err)
	}
	out := make([]DeadLetter, 0, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		var dl DeadLetter
		s, _ := msgs[i].Values["dead"].(string)
		if json.Unmarshal([]byte(s), &dl) != nil {
			continue
		}
		dl.ID = msgs[i].ID
		out = append(out, dl)
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
