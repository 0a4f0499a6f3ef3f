package cli

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/trawlerhq/trawler/internal/credentials"
	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/redisurl"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
)

// authSettings are the stores' credentials and TLS settings. Secrets are named by file
// (…-password-file, …-api-key-file), never given as values, so that they stay out of
// process lists, shell histories and endpoints.json; the other settings are names and
// paths. They resolve like every setting (settings.go): flag, then TRAWLER_* environment
// variable, then the --data directory's endpoints.json (file paths only), then none.
type authSettings struct {
	redisPasswordFile, redisCAFile                                                    string
	kafkaSASL, kafkaUser, kafkaPasswordFile, kafkaCAFile                              string
	kafkaTLS                                                                          bool
	esUser, esPasswordFile, esAPIKeyFile, esCAFile                                    string
	mongoPasswordFile                                                                 string
	temporalTLS                                                                       bool
	temporalCert, temporalKey, temporalCAFile, temporalServerName, temporalAPIKeyFile string
}

// table lists the credential settings, as rows of the settings table (settings.go).
func (a *authSettings) table() []setting {
	type E = endpoints.Endpoints
	return []setting{
		{"redis-password-file", "TRAWLER_REDIS_PASSWORD_FILE", "file holding the Redis password (replaces one in --redis)", &a.redisPasswordFile, nil, func(e *E) any { return e.RedisPasswordFile }, nil},
		{"redis-ca-file", "TRAWLER_REDIS_CA_FILE", "PEM CA that signed the Redis servers' certificates, for rediss:// (default: system roots)", &a.redisCAFile, nil, func(e *E) any { return e.RedisCAFile }, nil},
		{"kafka-sasl", "TRAWLER_KAFKA_SASL", "SASL mechanism of the Kafka brokers: plain, scram-sha-256 or scram-sha-512 (default: none)", &a.kafkaSASL, nil, func(e *E) any { return e.KafkaSASL }, nil},
		{"kafka-user", "TRAWLER_KAFKA_USER", "SASL user name for Kafka", &a.kafkaUser, nil, func(e *E) any { return e.KafkaUser }, nil},
		{"kafka-password-file", "TRAWLER_KAFKA_PASSWORD_FILE", "file holding the SASL password for Kafka", &a.kafkaPasswordFile, nil, func(e *E) any { return e.KafkaPasswordFile }, nil},
		{"kafka-tls", "TRAWLER_KAFKA_TLS", "talk TLS to the Kafka brokers (on with --kafka-ca-file)", nil, &a.kafkaTLS, func(e *E) any { return e.KafkaTLS }, nil},
		{"kafka-ca-file", "TRAWLER_KAFKA_CA_FILE", "PEM CA that signed the Kafka brokers' certificates (turns TLS on; default: system roots)", &a.kafkaCAFile, nil, func(e *E) any { return e.KafkaCAFile }, nil},
		{"es-user", "TRAWLER_ES_USER", "Elasticsearch basic-auth user (or user:password@ in --es)", &a.esUser, nil, func(e *E) any { return e.ESUser }, nil},
		{"es-password-file", "TRAWLER_ES_PASSWORD_FILE", "file holding the Elasticsearch password of --es-user", &a.esPasswordFile, nil, func(e *E) any { return e.ESPasswordFile }, nil},
		{"es-api-key-file", "TRAWLER_ES_API_KEY_FILE", "file holding an Elasticsearch API key (the base64 \"encoded\" value)", &a.esAPIKeyFile, nil, func(e *E) any { return e.ESAPIKeyFile }, nil},
		{"es-ca-file", "TRAWLER_ES_CA_FILE", "PEM CA that signed Elasticsearch's certificate (default: system roots)", &a.esCAFile, nil, func(e *E) any { return e.ESCAFile }, nil},
		{"mongo-password-file", "TRAWLER_MONGO_PASSWORD_FILE", "file holding the MongoDB password of the user in --mongo (mongodb://USER@host/…)", &a.mongoPasswordFile, nil, func(e *E) any { return e.MongoPasswordFile }, nil},
		{"temporal-tls", "TRAWLER_TEMPORAL_TLS", "talk TLS to Temporal (on with any --temporal-tls-*/--temporal-ca-file/--temporal-api-key-file)", nil, &a.temporalTLS, func(e *E) any { return e.TemporalTLS }, nil},
		{"temporal-tls-cert", "TRAWLER_TEMPORAL_TLS_CERT", "PEM client certificate for Temporal mTLS", &a.temporalCert, nil, func(e *E) any { return e.TemporalTLSCert }, nil},
		{"temporal-tls-key", "TRAWLER_TEMPORAL_TLS_KEY", "PEM private key of --temporal-tls-cert", &a.temporalKey, nil, func(e *E) any { return e.TemporalTLSKey }, nil},
		{"temporal-ca-file", "TRAWLER_TEMPORAL_CA_FILE", "PEM CA that signed the Temporal frontend's certificate (default: system roots)", &a.temporalCAFile, nil, func(e *E) any { return e.TemporalCAFile }, nil},
		{"temporal-server-name", "TRAWLER_TEMPORAL_SERVER_NAME", "name to verify the Temporal frontend's certificate against (default: the --temporal host)", &a.temporalServerName, nil, func(e *E) any { return e.TemporalServerName }, nil},
		{"temporal-api-key-file", "TRAWLER_TEMPORAL_API_KEY_FILE", "file holding a Temporal API key (Temporal Cloud); turns TLS on", &a.temporalAPIKeyFile, nil, func(e *E) any { return e.TemporalAPIKeyFile }, nil},
	}
}

func (a *authSettings) register(pf *pflag.FlagSet) {
	for _, r := range a.table() {
		usage := r.usage + " [" + r.env + "]"
		if r.boolean != nil {
			pf.BoolVar(r.boolean, r.flag, false, usage)
		} else {
			pf.StringVar(r.str, r.flag, "", usage)
		}
	}
}

// redisOptions are the password and CA of --redis.
func (s *Settings) redisOptions() (redisurl.Options, error) {
	pw, err := credentials.Secret("--redis-password-file", s.auth.redisPasswordFile)
	return redisurl.Options{Password: pw, CAFile: s.auth.redisCAFile}, err
}

// storeAuth reads the Kafka and Elasticsearch credentials of the settings.
func (s *Settings) storeAuth() (engine.StoreAuth, error) {
	k, err := s.kafkaAuth()
	if err != nil {
		return engine.StoreAuth{}, err
	}
	e, err := s.esAuth()
	return engine.StoreAuth{Kafka: k, ES: e}, err
}

func (s *Settings) kafkaAuth() (kafka.Auth, error) {
	var out kafka.Auth
	a := s.auth
	pw, err := credentials.Secret("--kafka-password-file", a.kafkaPasswordFile)
	if err != nil {
		return out, err
	}
	if out.SASL, err = kafka.Mechanism(a.kafkaSASL, a.kafkaUser, pw); err != nil {
		return out, err
	}
	if a.kafkaTLS || a.kafkaCAFile != "" {
		out.TLS, err = credentials.TLSFiles{CAFile: a.kafkaCAFile, CAFlag: "--kafka-ca-file"}.Config()
	}
	return out, err
}

// esAuth reads the Elasticsearch credentials (the es sink's and trawler search's).
func (s *Settings) esAuth() (es.Auth, error) {
	var out es.Auth
	a := s.auth
	var err error
	if out.Password, err = credentials.Secret("--es-password-file", a.esPasswordFile); err != nil {
		return out, err
	}
	out.Username = a.esUser
	if (out.Username == "") != (out.Password == "") {
		return out, fmt.Errorf("--es-user and --es-password-file go together: give both (or user:password@ in --es)")
	}
	if out.APIKey, err = credentials.Secret("--es-api-key-file", a.esAPIKeyFile); err != nil {
		return out, err
	}
	if a.esCAFile != "" {
		// Checked here so a bad file fails with its flag, not inside the client.
		if _, err := (credentials.TLSFiles{CAFile: a.esCAFile, CAFlag: "--es-ca-file"}).Config(); err != nil {
			return out, err
		}
		out.CACert, _ = os.ReadFile(a.esCAFile)
	}
	return out, nil
}

// withMongoPassword puts the password of --mongo-password-file into the --mongo URI,
// the driver's one place for it, so every MongoDB client (sink, items claim, console)
// gets it. The URI must name the user.
func withMongoPassword(uri, file string) (string, error) {
	if uri == "" || file == "" {
		return uri, nil
	}
	pw, err := credentials.Secret("--mongo-password-file", file)
	if err != nil {
		return "", err
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if !ok || at < 0 {
		return "", fmt.Errorf("--mongo-password-file needs the user in --mongo: mongodb://USER@host:27017/…")
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	// The driver unescapes user info with url.PathUnescape; QueryEscape escapes : @ /
	// and the like, and %20 keeps a space a space.
	return scheme + "://" + user + ":" + strings.ReplaceAll(url.QueryEscape(pw), "+", "%20") + rest[at:], nil
}

// temporalAuth reads the TLS files and API key of the Temporal settings.
func (s *Settings) temporalAuth() (engine.TemporalAuth, error) {
	a := s.auth
	var out engine.TemporalAuth
	key, err := credentials.Secret("--temporal-api-key-file", a.temporalAPIKeyFile)
	if err != nil {
		return out, err
	}
	out.APIKey = key
	if a.temporalTLS || a.temporalCert != "" || a.temporalKey != "" || a.temporalCAFile != "" || a.temporalServerName != "" {
		out.TLS, err = credentials.TLSFiles{
			CAFile: a.temporalCAFile, CAFlag: "--temporal-ca-file",
			CertFile: a.temporalCert, CertFlag: "--temporal-tls-cert",
			KeyFile: a.temporalKey, KeyFlag: "--temporal-tls-key",
			ServerName: a.temporalServerName,
		}.Config()
	}
	return out, err
}
