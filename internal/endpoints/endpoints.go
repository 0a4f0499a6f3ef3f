// Package endpoints reads and writes the endpoints file of a data directory: every
// address a running dev stack serves. It is apart from the embedded servers so that a
// build without them (a production worker) still reads the file.
package endpoints

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
)

// File is the name of the file, inside the data directory, that
// lists every address a running stack serves.
const File = "endpoints.json"

// Endpoints is the content of <DataDir>/endpoints.json: every address the
// stack serves. Components started next to the Temporal server (demo site,
// brokers, databases ...) add their own fields; every optional field carries
// omitempty so that older readers and writers keep working.
type Endpoints struct {
	Temporal   string   `json:"temporal"`              // host:port of the frontend gRPC
	Namespace  string   `json:"namespace"`             // namespace clients should use
	TemporalUI string   `json:"temporal_ui,omitempty"` // http://host:port
	DemoSite   string   `json:"demo_site,omitempty"`   // filled by the caller, not by StartTemporal
	Redis      string   `json:"redis,omitempty"`       // host:port of the Redis the workers deduplicate with
	Kafka      []string `json:"kafka,omitempty"`       // host:port of each broker of the kafka sink
	Mongo      string   `json:"mongo,omitempty"`       // mongodb:// URI of the mongo sink
	ES         string   `json:"es,omitempty"`          // http:// URL of the es sink's Elasticsearch
	HBaseZK    string   `json:"hbase_zk,omitempty"`    // ZooKeeper quorum (host:port) of the hbase sink's HBase

	// Credentials of the stores, for a data directory that points at secured
	// servers: names and file paths only. The secrets stay in their own files (mode
	// 0600), never in this file, which is written 0644.
	RedisPasswordFile  string `json:"redis_password_file,omitempty"`
	RedisCAFile        string `json:"redis_ca_file,omitempty"`
	KafkaSASL          string `json:"kafka_sasl,omitempty"` // plain, scram-sha-256, scram-sha-512
	KafkaUser          string `json:"kafka_user,omitempty"`
	KafkaPasswordFile  string `json:"kafka_password_file,omitempty"`
	KafkaTLS           bool   `json:"kafka_tls,omitempty"`
	KafkaCAFile        string `json:"kafka_ca_file,omitempty"`
	ESUser             string `json:"es_user,omitempty"`
	ESPasswordFile     string `json:"es_password_file,omitempty"`
	ESAPIKeyFile       string `json:"es_api_key_file,omitempty"`
	ESCAFile           string `json:"es_ca_file,omitempty"`
	MongoPasswordFile  string `json:"mongo_password_file,omitempty"`
	TemporalTLS        bool   `json:"temporal_tls,omitempty"`
	TemporalTLSCert    string `json:"temporal_tls_cert,omitempty"`
	TemporalTLSKey     string `json:"temporal_tls_key,omitempty"`
	TemporalCAFile     string `json:"temporal_ca_file,omitempty"`
	TemporalServerName string `json:"temporal_server_name,omitempty"`
	TemporalAPIKeyFile string `json:"temporal_api_key_file,omitempty"`
}

// Path returns the path of the endpoints file in dataDir.
func Path(dataDir string) string {
	return filepath.Join(dataDir, File)
}

// Write atomically replaces <dataDir>/endpoints.json with e as
// indented JSON (mode 0644): readers see either the old or the new content,
// never a partial file.
func Write(dataDir string, e Endpoints) error {
	if dataDir == "" {
		return errors.New("devstack: WriteEndpoints: empty data directory")
	}
	path := Path(dataDir)
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("devstack: encoding %s: %w", path, err)
	}
	data = append(data, '\n')

	tmp, err := os.CreateTemp(dataDir, "."+File+".*.tmp")
	if err != nil {
		return fmt.Errorf("devstack: writing %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer func() {
		if tmpName != "" {
			_ = os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("devstack: writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("devstack: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("devstack: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("devstack: writing %s: %w", path, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("devstack: writing %s: %w", path, err)
	}
	tmpName = ""
	return nil
}

// Read reads <dataDir>/endpoints.json as written by a running stack
// (or by WriteEndpoints).
func Read(dataDir string) (Endpoints, error) {
	path := Path(dataDir)
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Endpoints{}, fmt.Errorf("devstack: %s not found: no stack is running on this data directory; start `trawler dev --data %s` first", path, dataDir)
		}
		return Endpoints{}, fmt.Errorf("devstack: reading %s: %w", path, err)
	}
	var e Endpoints
	if err := json.Unmarshal(data, &e); err != nil {
		return Endpoints{}, fmt.Errorf("devstack: %s is not valid endpoints JSON (%v); restart `trawler dev --data %s` to rewrite it", path, err, dataDir)
	}
	return e, nil
}

// Remove deletes the endpoints file; a missing file is not an error.
func Remove(dataDir string) error {
	err := os.Remove(Path(dataDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devstack: removing %s: %w", Path(dataDir), err)
	}
	return nil
}

// Vars are the stack's addresses under their endpoints.json names, as chain files use
// them: `base_url: ${demo_site:-http://127.0.0.1:8089}`.
func (e Endpoints) Vars() map[string]string {
	vars := map[string]string{
		"temporal": e.Temporal, "namespace": e.Namespace, "temporal_ui": e.TemporalUI, "demo_site": e.DemoSite,
		"redis": e.Redis, "kafka": strings.Join(e.Kafka, ","), "mongo": e.Mongo, "es": e.ES, "hbase_zk": e.HBaseZK,
	}
	maps.DeleteFunc(vars, func(_, v string) bool { return v == "" })
	return vars
}
