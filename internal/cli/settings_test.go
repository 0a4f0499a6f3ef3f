package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/endpoints"
)

// configShow runs `trawler config show --json` with args and returns each setting's
// value and source.
func configShow(t *testing.T, args ...string) (map[string][2]string, error) {
	t.Helper()
	var out strings.Builder
	root := newRoot()
	root.SetArgs(append([]string{"config", "show", "--json"}, args...))
	root.SetOut(&out)
	if err := root.ExecuteContext(context.Background()); err != nil {
		return nil, err
	}
	var got struct {
		Settings []struct{ Setting, Value, Source string }
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	m := map[string][2]string{}
	for _, s := range got.Settings {
		m[s.Setting] = [2]string{s.Value, s.Source}
	}
	return m, nil
}

// clearEnv unsets every TRAWLER_* variable the settings read, for the test.
func clearEnv(t *testing.T) {
	for _, r := range (&Settings{}).table() {
		t.Setenv(r.env, "")
	}
}

// TestSettingsPrecedence: every setting resolves by one rule, flag > env >
// endpoints.json > default, and `trawler config show` names where each value came from.
func TestSettingsPrecedence(t *testing.T) {
	stack := endpoints.Endpoints{Temporal: "127.0.0.1:7999", Namespace: "stack-ns", Redis: "127.0.0.1:6399",
		Kafka: []string{"127.0.0.1:9092", "127.0.0.1:9093"}, KafkaTLS: true, ESUser: "es-from-file"}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		stack   bool // --data names a directory with endpoints.json
		setting string
		value   string
		source  string
	}{
		{"flag beats env and endpoints.json", []string{"--namespace", "flag-ns"}, map[string]string{"TRAWLER_NAMESPACE": "env-ns"}, true, "namespace", "flag-ns", fromFlag},
		{"env beats endpoints.json", nil, map[string]string{"TRAWLER_NAMESPACE": "env-ns"}, true, "namespace", "env-ns", fromEnv},
		{"endpoints.json beats default", nil, nil, true, "namespace", "stack-ns", fromEndpoints},
		{"default when nothing is set", nil, nil, false, "namespace", "default", fromDefault},
		{"endpoints.json fills a store when --temporal is set", []string{"--temporal", "10.0.0.1:7233"}, nil, true, "kafka", "127.0.0.1:9092,127.0.0.1:9093", fromEndpoints},
		{"endpoints.json fills a store when TRAWLER_TEMPORAL is set", nil, map[string]string{"TRAWLER_TEMPORAL": "10.0.0.1:7233"}, true, "redis", "127.0.0.1:6399", fromEndpoints},
		{"env beats endpoints.json for a credential", nil, map[string]string{"TRAWLER_ES_USER": "es-from-env"}, true, "es-user", "es-from-env", fromEnv},
		{"endpoints.json sets a bool", nil, nil, true, "kafka-tls", "true", fromEndpoints},
		{"env turns a bool off over endpoints.json", nil, map[string]string{"TRAWLER_KAFKA_TLS": "off"}, true, "kafka-tls", "false", fromEnv},
		{"default derived from --data", nil, nil, true, "out", "", fromDefault},
		{"env sets what endpoints.json lacks", nil, map[string]string{"TRAWLER_OTLP": "stderr"}, false, "otlp", "stderr", fromEnv},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			dir := t.TempDir()
			if tc.stack {
				if err := endpoints.Write(dir, stack); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--data", dir)
			}
			got, err := configShow(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			want := [2]string{tc.value, tc.source}
			if tc.setting == "out" {
				want[0] = filepath.Join(dir, "out")
			}
			if got[tc.setting] != want {
				t.Errorf("--%s = %q from %s, want %q from %s", tc.setting, got[tc.setting][0], got[tc.setting][1], want[0], want[1])
			}
		})
	}
}

// TestNoneLeavesAStoreOut: `--kafka none` (or TRAWLER_MONGO=none) leaves out a store
// the stack's endpoints.json names, through a second resolve too (follow re-reads the
// file), and config show says so.
func TestNoneLeavesAStoreOut(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	stack := endpoints.Endpoints{Temporal: "127.0.0.1:7999", Kafka: []string{"127.0.0.1:9092"}, Mongo: "mongodb://127.0.0.1:27017/", ES: "http://127.0.0.1:9200"}
	if err := endpoints.Write(dir, stack); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWLER_MONGO", "none")
	s := &Settings{Data: dir, Kafka: "none"} // --kafka none
	for range 2 {
		if err := s.Resolve(); err != nil {
			t.Fatal(err)
		}
		if s.Kafka != "" || len(s.KafkaBrokers()) != 0 || s.Mongo != "" || s.ES != stack.ES {
			t.Fatalf("kafka %q (brokers %v), mongo %q, es %q; want kafka and mongo left out, es %s from endpoints.json", s.Kafka, s.KafkaBrokers(), s.Mongo, s.ES, stack.ES)
		}
	}
	got, err := configShow(t, "--data", dir, "--kafka", "none")
	if err != nil {
		t.Fatal(err)
	}
	if got["kafka"] != [2]string{"none", fromFlag} || got["mongo"] != [2]string{"none", fromEnv} || got["es"] != [2]string{stack.ES, fromEndpoints} {
		t.Errorf("config show: kafka %v, mongo %v, es %v", got["kafka"], got["mongo"], got["es"])
	}
}

// TestSettingsErrors: a bool that is not one, and a --data without a stack while
// Temporal is to come from it, say what to fix.
func TestSettingsErrors(t *testing.T) {
	clearEnv(t)
	empty := t.TempDir()
	_, err := configShow(t, "--data", empty)
	want := "devstack: " + filepath.Join(empty, "endpoints.json") + " not found: no stack is running on this data directory; start `trawler dev --data " + empty + "` first"
	if err == nil || err.Error() != want {
		t.Fatalf("missing endpoints.json: %v\nwant %s", err, want)
	}
	// With Temporal named elsewhere, a --data without a stack is only the output directory.
	got, err := configShow(t, "--data", empty, "--temporal", "10.0.0.1:7233")
	if err != nil || got["out"] != [2]string{filepath.Join(empty, "out"), fromDefault} {
		t.Fatalf("--data without a stack: %v, %v", got["out"], err)
	}
	t.Setenv("TRAWLER_KAFKA_TLS", "maybe")
	if _, err := configShow(t); err == nil || err.Error() != "TRAWLER_KAFKA_TLS=maybe: want true or false" {
		t.Fatalf("bad bool: %v", err)
	}
}

// TestConfigShowMasksSecrets: passwords in URLs and secret query parameters never reach
// the output, in text or JSON; the rest of the address does.
func TestConfigShowMasksSecrets(t *testing.T) {
	clearEnv(t)
	pw := filepath.Join(t.TempDir(), "mongo-pw")
	if err := os.WriteFile(pw, []byte("m0ngo-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWLER_ES", "https://elastic:es-s3cret@es.internal:9200")
	t.Setenv("TRAWLER_MONGO_PASSWORD_FILE", pw)
	args := []string{"config", "show", "--temporal", "10.0.0.1:7233", "--redis", "redis://:r3dis-s3cret@cache:6379/2",
		"--mongo", "mongodb://crawler@db:27017/trawler", "--otlp", "", "--secret-params", "sig", "--kafka", "k1:9092"}
	for _, format := range [][]string{nil, {"--json"}} {
		var out strings.Builder
		root := newRoot()
		root.SetArgs(append(args, format...))
		root.SetOut(&out)
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		for _, secret := range []string{"r3dis-s3cret", "es-s3cret", "m0ngo-s3cret"} {
			if strings.Contains(text, secret) {
				t.Errorf("%v output shows %s:\n%s", format, secret, text)
			}
		}
		for _, shown := range []string{"redis://:***@cache:6379/2", "https://elastic:***@es.internal:9200", "mongodb://crawler:***@db:27017/trawler", pw} {
			if !strings.Contains(text, shown) {
				t.Errorf("%v output lacks %s:\n%s", format, shown, text)
			}
		}
	}
}
