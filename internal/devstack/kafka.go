package devstack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaBrokers is how many brokers the embedded Kafka cluster runs.
const KafkaBrokers = 1

// StartKafka starts an embedded Kafka cluster (kfake) of KafkaBrokers brokers on free
// loopback ports. It keeps topics and records under <dataDir>/kafka, so a restart on the
// same directory finds them again. Topics are not auto-created on a producer's metadata
// request: the kafka sink creates the ones it writes to, with their partition counts.
// stop shuts the cluster down and flushes its files.
func StartKafka(dataDir string) (addrs []string, stop func() error, err error) {
	return StartKafkaOn(dataDir, nil)
}

// StartKafkaOn is StartKafka on the given loopback ports (one per broker; nil or zeros
// for free ports), for restarting a cluster where its clients expect it.
func StartKafkaOn(dataDir string, ports []int) (addrs []string, stop func() error, err error) {
	if dataDir == "" {
		return nil, nil, errors.New("devstack: StartKafka: empty data directory")
	}
	if len(ports) > 0 && len(ports) != KafkaBrokers {
		return nil, nil, fmt.Errorf("devstack: StartKafka: %d ports for %d brokers", len(ports), KafkaBrokers)
	}
	dir := filepath.Join(dataDir, "kafka")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("devstack: create %s: %w", dir, err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(KafkaBrokers),
		kfake.DataDir(dir),
		kfake.ClusterID("trawler-dev"),
		kfake.DefaultNumPartitions(3),
	}
	if len(ports) > 0 {
		opts = append(opts, kfake.Ports(ports...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("devstack: start the embedded Kafka (data in %s): %w", dir, err)
	}
	stop = func() error {
		c.Close()
		return nil
	}
	return c.ListenAddrs(), stop, nil
}
