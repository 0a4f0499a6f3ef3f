// Package kafka is the hot-stream sink: every stored item becomes one Kafka message.
//
// Layout: topic `trawler.<site>.<task>` (the item's biz, created with Config.Partitions
// partitions and Config.Replication replicas when missing), message key =
// storage.TenantKey(tenant, key) — the item's `key` for the default tenant, "@tenant:key"
// for another, "@:key" for a default-tenant key that starts with "@" — so every copy of
// one record lands in one partition, in order, and no two tenants' records share a
// message key whatever their keys hold; value = the item as JSON (the same object the
// jsonl sink writes), header `trawler-id` = the item's `id`.
//
// Delivery is at least once. Write returns when every message is acknowledged by all
// in-sync replicas (acks=all). A batch that fails half-way (a broker down, a timeout
// after the broker stored the messages but before it answered) fails the Temporal
// activity, which retries the batch, so some messages may be sent twice. A retried
// batch resends the same item ids, so consumers drop repeats by `id` (the `trawler-id`
// header, or `id` in the JSON): keep the ids seen recently per topic, or upsert by the
// message key into a store that keeps one copy (as the mongo sink does). Count reads the
// topics back and counts distinct ids, which is what a consumer that drops repeats sees.
package kafka

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
)

// TopicPrefix starts the name of every topic the sink writes.
const TopicPrefix = "trawler."

// IDHeader is the message header carrying the item id.
const IDHeader = "trawler-id"

// Config configures the sink.
type Config struct {
	Brokers     []string // host:port of one or more brokers
	Partitions  int      // partitions of a topic the sink creates (default 3)
	Replication int      // replication factor of a topic the sink creates (default 1)
	// WriteTimeout bounds one Write, retries included (default 15s, within the batch
	// activity's default heartbeat timeout of 30s).
	WriteTimeout time.Duration
	Auth         Auth
}

// Auth is how the sink authenticates to the brokers: SASL (Mechanism) and TLS, each
// optional. Every connection the sink opens (writes, topic creation, reading back)
// uses both.
type Auth struct {
	SASL sasl.Mechanism // nil: no SASL
	TLS  *tls.Config    // nil: plaintext
}

// SASL mechanism names, as --kafka-sasl takes them.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Mechanism returns kafka-go's SASL mechanism called name (plain, scram-sha-256,
// scram-sha-512; "" for none) for user and password.
func Mechanism(name, user, password string) (sasl.Mechanism, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		if user != "" || password != "" {
			return nil, errors.New("kafka: a user or password without --kafka-sasl: pass --kafka-sasl plain, scram-sha-256 or scram-sha-512")
		}
		return nil, nil
	}
	if user == "" || password == "" {
		return nil, fmt.Errorf("kafka: --kafka-sasl %s needs --kafka-user and --kafka-password-file", name)
	}
	switch name {
	case SASLPlain:
		return plain.Mechanism{Username: user, Password: password}, nil
	case SASLScramSHA256:
		return scram.Mechanism(scram.SHA256, user, password)
	case SASLScramSHA512:
		return scram.Mechanism(scram.SHA512, user, password)
	}
	return nil, fmt.Errorf("kafka: --kafka-sasl %q: want plain, scram-sha-256 or scram-sha-512", name)
}

// Dialer is a kafka-go dialer with the auth's SASL and TLS, for the connections a
// client opens itself (listing partitions, finding a leader, reading).
func (a Auth) Dialer() *kafkago.Dialer {
	return &kafkago.Dialer{Timeout: 5 * time.Second, DualStack: true, ClientID: "trawler", SASLMechanism: a.SASL, TLS: a.TLS}
}

// Sink writes items to Kafka topics.
type Sink struct {
	cfg       Config
	transport *kafkago.Transport
	client    *kafkago.Client
	writer    *kafkago.Writer

	mu     sync.Mutex
	topics map[string]bool // created (or found) by this sink
}

// Topic is the topic items of one biz (site.task) go to.
func Topic(biz string) string { return TopicPrefix + biz }

// Open returns a sink for the brokers. It does not connect: the first Write does, and a
// cluster that is down fails that Write (and Temporal retries the batch).
func Open(cfg Config) (*Sink, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka sink: no brokers configured (--kafka HOST:PORT[,HOST:PORT…])")
	}
	for _, b := range cfg.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return nil, fmt.Errorf("kafka sink: broker %q: want host:port", b)
		}
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 3
	}
	if cfg.Replication <= 0 {
		cfg.Replication = 1
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 15 * time.Second
	}
	tr := &kafkago.Transport{
		ClientID:    "trawler",
		DialTimeout: 5 * time.Second,
		MetadataTTL: 2 * time.Second,
		SASL:        cfg.Auth.SASL,
		TLS:         cfg.Auth.TLS,
	}
	addr := kafkago.TCP(cfg.Brokers...)
	s := &Sink{
		cfg:       cfg,
		transport: tr,
		client:    &kafkago.Client{Addr: addr, Transport: tr, Timeout: 10 * time.Second},
		topics:    map[string]bool{},
	}
	s.writer = &kafkago.Writer{
		Addr:      addr,
		Transport: tr,
		// Java clients' default partitioner: a key maps to the same partition from any
		// producer.
		Balancer:     &kafkago.Murmur2Balancer{},
		RequiredAcks: kafkago.RequireAll,
		// One Write is a few hundred items at most; send them in as few requests as fit
		// and do not wait for more.
		BatchSize:       1000,
		BatchBytes:      1 << 20,
		BatchTimeout:    5 * time.Millisecond,
		MaxAttempts:     3,
		WriteBackoffMin: 100 * time.Millisecond,
		WriteBackoffMax: time.Second,
		ReadTimeout:     10 * time.Second,
		WriteTimeout:    10 * time.Second,
		Compression:     kafkago.Snappy,
	}
	return s, nil
}

// Name implements storage.Sink.
func (s *Sink) Name() string { return "kafka" }

// Brokers are the addresses the sink was opened with.
func (s *Sink) Brokers() []string { return s.cfg.Brokers }

// Write implements storage.Sink: it returns when every message is acknowledged by all
// in-sync replicas, or with the first cause of failure.
func (s *Sink) Write(ctx context.Context, items []crawl.Item) error {
	if len(items) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	msgs := make([]kafkago.Message, 0, len(items))
	for _, it := range items {
		topic := Topic(it.Biz)
		if !s.known(topic) {
			if err := validTopic(topic); err != nil {
				return err
			}
			if err := s.ensure(ctx, topic); err != nil {
				return err
			}
		}
		value, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("kafka sink: encode item %s: %w", it.Key, err)
		}
		msgs = append(msgs, kafkago.Message{
			Topic:   topic,
			Key:     []byte(storage.TenantKey(it.Tenant, it.Key)),
			Value:   value,
			Headers: []kafkago.Header{{Key: IDHeader, Value: []byte(strconv.FormatInt(it.ID, 10))}},
			Time:    it.TS,
		})
	}
	if err := s.writer.WriteMessages(ctx, msgs...); err != nil {
		// A topic deleted or lost behind our back is created again on the retry.
		s.mu.Lock()
		for _, m := range msgs {
			delete(s.topics, m.Topic)
		}
		s.mu.Unlock()
		return fmt.Errorf("kafka sink: %s", describeWriteError(err, len(msgs), s.cfg.Brokers))
	}
	return nil
}

// Publish sends one message to topic (created when missing, as Write creates an
// item's topic) and returns when all in-sync replicas have it: what the event
// deliverer produces to the events topic with.
func (s *Sink) Publish(ctx context.Context, topic string, key, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	if !s.known(topic) {
		if err := validTopic(topic); err != nil {
			return err
		}
		if err := s.ensure(ctx, topic); err != nil {
			return err
		}
	}
	if err := s.writer.WriteMessages(ctx, kafkago.Message{Topic: topic, Key: key, Value: value}); err != nil {
		s.mu.Lock()
		delete(s.topics, topic)
		s.mu.Unlock()
		return fmt.Errorf("kafka: %s", describeWriteError(err, 1, s.cfg.Brokers))
	}
	return nil
}

func (s *Sink) known(topic string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topics[topic]
}

// ensure creates a topic unless it exists and waits until the writer's metadata has it.
func (s *Sink) ensure(ctx context.Context, topic string) error {
	resp, err := s.client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: topic, NumPartitions: s.cfg.Partitions, ReplicationFactor: s.cfg.Replication,
	}}})
	if err != nil {
		return fmt.Errorf("kafka sink: create topic %s on %s: %w", topic, strings.Join(s.cfg.Brokers, ","), err)
	}
	if err := resp.Errors[topic]; err != nil && !errors.Is(err, kafkago.TopicAlreadyExists) {
		return fmt.Errorf("kafka sink: create topic %s (%d partitions, replication %d): %w", topic, s.cfg.Partitions, s.cfg.Replication, err)
	}
	// The writer partitions by the transport's cached metadata, which learns about a
	// topic created elsewhere within its TTL.
	for {
		md, err := s.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
		if err == nil {
			for _, t := range md.Topics {
				if t.Name == topic && t.Error == nil && len(t.Partitions) > 0 {
					s.mu.Lock()
					s.topics[topic] = true
					s.mu.Unlock()
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka sink: topic %s does not show up in the cluster metadata: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// validTopic checks what Kafka accepts as a topic name.
func validTopic(t string) error {
	if len(t) > 249 {
		return fmt.Errorf("kafka sink: topic %q is longer than 249 characters", t)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("kafka sink: topic %q: Kafka topic names allow only letters, digits, '.', '_' and '-'", t)
		}
	}
	return nil
}

// describeWriteError turns kafka-go's per-message errors into one line: how many
// messages failed and the distinct causes.
func describeWriteError(err error, total int, brokers []string) string {
	var werr kafkago.WriteErrors
	if !errors.As(err, &werr) {
		return fmt.Sprintf("write %d messages to %s: %v", total, strings.Join(brokers, ","), err)
	}
	causes := map[string]int{}
	for _, e := range werr {
		if e != nil {
			causes[e.Error()]++
		}
	}
	list := make([]string, 0, len(causes))
	for c := range causes {
		list = append(list, c)
	}
	sort.Strings(list)
	if len(list) > 3 {
		list = append(list[:3], "…")
	}
	return fmt.Sprintf("%d of %d messages not acknowledged by %s: %s", werr.Count(), total, strings.Join(brokers, ","), strings.Join(list, "; "))
}

// Count implements storage.Sink: the distinct item ids of the run in the trawler topics,
// read back from the brokers with a reader. It reads every message of every trawler
// topic; CountSince reads only those from a time on.
func (s *Sink) Count(ctx context.Context, runID string) (int, error) {
	return s.CountSince(ctx, runID, time.Time{})
}

// CountSince is Count over the messages timestamped since (the item's fetch time) or
// later: give it the run's start, less a margin for clock skew between hosts.
func (s *Sink) CountSince(ctx context.Context, runID string, since time.Time) (int, error) {
	ids := map[int64]bool{}
	err := s.scan(ctx, since, func(it crawl.Item) error {
		if it.RunID == runID {
			ids[it.ID] = true
		}
		return nil
	})
	return len(ids), err
}

// IDs reads the trawler topics back and returns, for each item id of the run, how many
// messages carry it (more than one after a retried batch).
func (s *Sink) IDs(ctx context.Context, runID string) (map[int64]int, error) {
	ids := map[int64]int{}
	err := s.scan(ctx, time.Time{}, func(it crawl.Item) error {
		if it.RunID == runID {
			ids[it.ID]++
		}
		return nil
	})
	return ids, err
}

// Scan reads every message of every trawler topic, oldest first per partition, up to
// the end of each partition as it was when Scan started.
func (s *Sink) Scan(ctx context.Context, fn func(crawl.Item) error) error {
	return s.scan(ctx, time.Time{}, fn)
}

func (s *Sink) scan(ctx context.Context, since time.Time, fn func(crawl.Item) error) error {
	parts, err := s.partitions(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := s.readPartition(ctx, p, since, fn); err != nil {
			return err
		}
	}
	return nil
}

// partitions lists the partitions of every trawler topic, fresh from a broker (not from
// the writer's cached metadata).
func (s *Sink) partitions(ctx context.Context) ([]kafkago.Partition, error) {
	var lastErr error
	for _, b := range s.cfg.Brokers {
		conn, err := s.cfg.Auth.Dialer().DialContext(ctx, "tcp", b)
		if err != nil {
			lastErr = err
			continue
		}
		all, err := conn.ReadPartitions()
		conn.Close()
		if err != nil {
			lastErr = err
			continue
		}
		var out []kafkago.Partition
		for _, p := range all {
			if strings.HasPrefix(p.Topic, TopicPrefix) {
				out = append(out, p)
			}
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].ID < out[j].ID
		})
		return out, nil
	}
	return nil, fmt.Errorf("kafka sink: list topics on %s: %w", strings.Join(s.cfg.Brokers, ","), lastErr)
}

func (s *Sink) readPartition(ctx context.Context, p kafkago.Partition, since time.Time, fn func(crawl.Item) error) error {
	leader, err := s.cfg.Auth.Dialer().DialLeader(ctx, "tcp", s.cfg.Brokers[0], p.Topic, p.ID)
	if err != nil {
		return fmt.Errorf("kafka sink: connect to the leader of %s/%d: %w", p.Topic, p.ID, err)
	}
	first, last, err := leader.ReadOffsets()
	if err == nil && !since.IsZero() {
		var at int64
		if at, err = leader.ReadOffset(since); err == nil {
			switch {
			case at < 0 || at > last: // nothing that recent
				first = last
			case at > first:
				first = at
			}
		}
	}
	leader.Close()
	if err != nil {
		return fmt.Errorf("kafka sink: offsets of %s/%d: %w", p.Topic, p.ID, err)
	}
	if last <= first {
		return nil
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:   s.cfg.Brokers,
		Dialer:    s.cfg.Auth.Dialer(),
		Topic:     p.Topic,
		Partition: p.ID,
		MinBytes:  1,
		MaxBytes:  16 << 20,
		MaxWait:   50 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		return err
	}
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return fmt.Errorf("kafka sink: read %s/%d at offset %d: %w", p.Topic, p.ID, r.Offset(), err)
		}
		var it crawl.Item
		if err := json.Unmarshal(m.Value, &it); err != nil {
			return fmt.Errorf("kafka sink: %s/%d offset %d is not an item: %w", p.Topic, p.ID, m.Offset, err)
		}
		if err := fn(it); err != nil {
			return err
		}
		if m.Offset >= last-1 {
			return nil
		}
	}
}

// Close implements storage.Sink.
func (s *Sink) Close() error {
	err := s.writer.Close()
	s.transport.CloseIdleConnections()
	return err
}

// AtLeastOnce implements storage.AtLeastOnce: a retried batch may resend messages.
func (s *Sink) AtLeastOnce() {}
