package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.temporal.io/sdk/client"
)

// check is one store's reachability.
type check struct {
	OK    bool    `json:"ok"`
	Error string  `json:"error,omitempty"`
	MS    float64 `json:"ms"`
}

// healthz: GET /healthz — every configured store's reachability; 503 when one is down.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	probes := map[string]func(context.Context) error{
		"temporal": func(ctx context.Context) error {
			_, err := s.cfg.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
	}
	if s.redis != nil {
		probes["redis"] = func(ctx context.Context) error { return s.redis.Ping(ctx).Err() }
	}
	if len(s.cfg.Kafka) > 0 {
		probes["kafka"] = func(ctx context.Context) error { return anyBroker(ctx, s.cfg.Kafka, s.cfg.KafkaAuth.Dialer()) }
	}
	if s.mongo != nil {
		probes["mongo"] = s.mongo.Ping
	}
	if s.es != nil {
		probes["es"] = func(ctx context.Context) error {
			res, err := s.es.Ping(s.es.Ping.WithContext(ctx))
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.IsError() {
				return fmt.Errorf("%s", res.Status())
			}
			return nil
		}
	}
	if s.hbase != nil {
		probes["hbase"] = s.hbaseProbe
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]check{}
	for name, probe := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := probe(ctx)
			c := check{OK: err == nil, MS: round(float64(time.Since(start).Microseconds()) / 1000)}
			if err != nil {
				c.Error = err.Error()
			}
			mu.Lock()
			out[name] = c
			mu.Unlock()
		}()
	}
	wg.Wait()
	status, down := http.StatusOK, []string{}
	for name, c := range out {
		if !c.OK {
			status = http.StatusServiceUnavailable
			down = append(down, name)
		}
	}
	sort.Strings(down)
	writeJSON(w, status, map[string]any{"ok": status == http.StatusOK, "down": down, "stores": out})
}

// anyBroker is nil when one Kafka broker accepts a connection.
func anyBroker(ctx context.Context, brokers []string, d *kafka.Dialer) error {
	var last error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			_, err = conn.Brokers()
			conn.Close()
		}
		if err == nil {
			return nil
		}
		last = err
	}
	return fmt.Errorf("no broker answers: %w", last)
}
