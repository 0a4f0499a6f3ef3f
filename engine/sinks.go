package engine

import (
	"log/slog"
	"time"

	"trawler/storage"
	"trawler/storage/jsonl"
	"trawler/storage/kafka"
	"trawler/storage/mongo"
)

// HotOptions tune the hot-storage sinks. Zero values take the sinks' defaults.
type HotOptions struct {
	KafkaPartitions  int           // partitions of a topic the kafka sink creates (3)
	KafkaReplication int           // replication factor of a topic it creates (1)
	MongoDatabase    string        // database of the mongo sink ("trawler")
	Retention        time.Duration // how long MongoDB keeps a record after its last fetch (30 days)
	SweepEvery       time.Duration // sweep interval on servers without TTL indexes (1 minute)
}

// SinkOptions say which sinks a process opens.
type SinkOptions struct {
	OutDir string   // the jsonl sink's directory; empty: no jsonl sink
	Kafka  []string // brokers of the kafka sink; empty: no kafka sink
	Mongo  string   // URI of the mongo sink; empty: no mongo sink
	Hot    HotOptions
	Log    *slog.Logger
}

// OpenSinks opens the configured sinks. Kafka and MongoDB are not contacted yet: a
// store that is down fails the batches that write to it (and Temporal retries them),
// not the worker.
func OpenSinks(o SinkOptions) (storage.Set, error) {
	set := storage.Set{}
	if o.OutDir != "" {
		js, err := jsonl.Open(o.OutDir)
		if err != nil {
			return nil, err
		}
		set["jsonl"] = js
	}
	if err := addHotSinks(set, o); err != nil {
		_ = set.Close()
		return nil, err
	}
	return set, nil
}

func addHotSinks(set storage.Set, o SinkOptions) error {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if len(o.Kafka) > 0 {
		k, err := kafka.Open(kafka.Config{Brokers: o.Kafka, Partitions: o.Hot.KafkaPartitions, Replication: o.Hot.KafkaReplication})
		if err != nil {
			return err
		}
		set[k.Name()] = k
	}
	if o.Mongo != "" {
		m, err := mongo.Open(mongo.Config{URI: o.Mongo, Database: o.Hot.MongoDatabase, Retention: o.Hot.Retention, SweepEvery: o.Hot.SweepEvery, Log: o.Log})
		if err != nil {
			return err
		}
		set[m.Name()] = m
	}
	return nil
}

// Stop stops the Temporal worker, then closes its sinks.
func (w *Worker) Stop() {
	w.Worker.Stop()
	_ = w.Sinks.Close()
}
