package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/file"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
)

// HotOptions tune the hot-storage sinks. Zero values take the sinks' defaults.
type HotOptions struct {
	KafkaPartitions  int           // partitions of a topic the kafka sink creates (3)
	KafkaReplication int           // replication factor of a topic it creates (1)
	MongoDatabase    string        // database of the mongo sink ("trawler")
	Retention        time.Duration // how long MongoDB keeps a record after its last fetch (30 days)
	SweepEvery       time.Duration // sweep interval on servers without TTL indexes (1 minute)
}

// StoreAuth are the stores' credentials and TLS settings, read from the files the
// settings name. MongoDB's travel in its URI (the driver's own place for them).
type StoreAuth struct {
	Kafka kafka.Auth
	ES    es.Auth
}

// SinkOptions say which sinks a process opens.
type SinkOptions struct {
	OutDir string   // the jsonl sink's directory; empty: no jsonl sink
	Kafka  []string // brokers of the kafka sink; empty: no kafka sink
	Mongo  string   // URI of the mongo sink; empty: no mongo sink
	ES     string   // URL of the es sink's Elasticsearch; empty: no es sink
	HBase  string   // ZooKeeper quorum of the hbase sink; empty: no hbase sink
	// File configures the file sink (rotated JSON Lines, CSV or Parquet files per
	// task); an empty Dir: no file sink.
	File FileOptions
	Auth StoreAuth
	// Registry gives the es sink each task's output schema for its index mapping.
	Registry *crawl.Registry
	Hot      HotOptions
	Log      *slog.Logger
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

// FileOptions configure the file sink.
type FileOptions struct {
	Dir         string        // where the files go; empty: no file sink
	Format      string        // jsonl (default), csv or parquet
	RotateSize  int64         // finish a file at this many bytes (0: no limit)
	RotateEvery time.Duration // finish a file this long after it started (0: no limit)
}

func addHotSinks(set storage.Set, o SinkOptions) error {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.File.Dir != "" {
		reg := o.Registry
		if reg == nil {
			reg = crawl.Default
		}
		f, err := file.Open(file.Options{Dir: o.File.Dir, Format: file.Format(o.File.Format), RotateSize: o.File.RotateSize,
			RotateEvery: o.File.RotateEvery, Specs: es.SpecsFrom(reg), Log: o.Log})
		if err != nil {
			return err
		}
		set[f.Name()] = f
	}
	if len(o.Kafka) > 0 {
		k, err := kafka.Open(kafka.Config{Brokers: o.Kafka, Partitions: o.Hot.KafkaPartitions, Replication: o.Hot.KafkaReplication, Auth: o.Auth.Kafka})
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
	if o.ES != "" {
		reg := o.Registry
		if reg == nil {
			reg = crawl.Default
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		e, err := es.Open(ctx, es.Options{Addresses: []string{o.ES}, Auth: o.Auth.ES, Specs: es.SpecsFrom(reg)})
		cancel()
		if err != nil {
			return err
		}
		set[e.Name()] = e
	}
	if o.HBase != "" {
		h, err := hbase.Open(hbase.Config{ZK: o.HBase, Log: o.Log})
		if err != nil {
			return err
		}
		set[h.Name()] = h
	}
	return nil
}
