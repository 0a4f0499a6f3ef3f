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
// paths. They resolve like every setting: flag, then TRAWLER_* environment variable,
// then the --data directory's endpoints.json (file paths only), then none.
type authSettings struct {
	redisPasswordFile, redisCAFile                                                    string
	kafkaSASL, kafkaUser, kafkaPasswordFile, kafkaCAFile                              string
	kafkaTLS                                                                          bool
	esUser, esPasswordFile, esAPIKeyFile, esCAFile                                    string
	mongoPasswordFile                                                                 string
	temporalTLS                                                                       bool
	temporalCert, temporalKey, temporalCAFile, temporalServerName, temporalAPIKeyFile string
}

// authSetting is one row of the table: a string or a bool setting, its flag,
// environment variable, endpoints.json field and help.
type authSetting struct {
	flag, env, usage string
	str              *string
	boolean          *bool
	ep               func(*endpoints.Endpoints) any // *string or *bool in the file
}

func (a *authSettings) table() []authSetting {
	type E = endpoints.Endpoints
	return []authSetting{
		{"redis-password-file", "TRAWLER_REDIS_PASSWORD_FILE", "file holding the Redis password (replaces one in --redis)", &a.redisPasswordFile, nil, func(e *E) any { return &e.RedisPasswordFile }},
		{"redis-ca-file", "TRAWLER_REDIS_CA_FILE", "PEM CA that signed the Redis servers' certificates, for rediss:// (default: system roots)", &a.redisCAFile, nil, func(e *E) any { return &e.RedisCAFile }},
		{"kafka-sasl", "TRAWLER_KAFKA_SASL", "SASL mechanism of the Kafka brokers: plain, scram-sha-256 or scram-sha-512 (default: none)", &a.kafkaSASL, nil, func(e *E) any { return &e.KafkaSASL }},
		{"kafka-user", "TRAWLER_KAFKA_USER", "SASL user name for Kafka", &a.kafkaUser, nil, func(e *E) any { return &e.KafkaUser }},
		{"kafka-password-file", "TRAWLER_KAFKA_PASSWORD_FILE", "file holding the SASL password for Kafka", &a.kafkaPasswordFile, nil, func(e *E) any { return &e.KafkaPasswordFile }},
		{"kafka-tls", "TRAWLER_KAFKA_TLS", "talk TLS to the Kafka brokers (on with --kafka-ca-file)", nil, &a.kafkaTLS, func(e *E) any { return &e.KafkaTLS }},
		{"kafka-ca-file", "TRAWLER_KAFKA_CA_FILE", "PEM CA that signed the Kafka brokers' certificates (turns TLS on; default: system roots)", &a.kafkaCAFile, nil, func(e *E) any { return &e.KafkaCAFile }},
		{"es-user", "TRAWLER_ES_USER", "Elasticsearch basic-auth user (or user:password@ in --es)", &a.esUser, nil, func(e *E) any { return &e.ESUser }},
		{"es-password-file", "TRAWLER_ES_PASSWORD_FILE", "file holding the Elasticsearch password of --es-user", &a.esPasswordFile, nil, func(e *E) any { return &e.ESPasswordFile }},
		{"es-api-key-file", "TRAWLER_ES_API_KEY_FILE", "file holding an Elasticsearch API key (the base64 \"encoded\" value)", &a.esAPIKeyFile, nil, func(e *E) any { return &e.ESAPIKeyFile }},
		{"es-ca-file", "TRAWLER_ES_CA_FILE", "PEM CA that signed Elasticsearch's certificate (default: system roots)", &a.esCAFile, nil, func(e *E) any { return &e.ESCAFile }},
		{"mongo-password-file", "TRAWLER_MONGO_PASSWORD_FILE", "file holding the MongoDB password of the user in --mongo (mongodb://USER@host/…)", &a.mongoPasswordFile, nil, func(e *E) any { return &e.MongoPasswordFile }},
		{"temporal-tls", "TRAWLER_TEMPORAL_TLS", "talk TLS to Temporal (on with any --temporal-tls-*/--temporal-ca-file/--temporal-api-key-file)", nil, &a.temporalTLS, func(e *E) any { return &e.TemporalTLS }},
		{"temporal-tls-cert", "TRAWLER_TEMPORAL_TLS_CERT", "PEM client certificate for Temporal mTLS", &a.temporalCert, nil, func(e *E) any { return &e.TemporalTLSCert }},
		{"temporal-tls-key", "TRAWLER_TEMPORAL_TLS_KEY", "PEM private key of --temporal-tls-cert", &a.temporalKey, nil, func(e *E) any { return &e.TemporalTLSKey }},
		{"temporal-ca-file", "TRAWLER_TEMPORAL_CA_FILE", "PEM CA that signed the Temporal frontend's certificate (default: system roots)", &a.temporalCAFile, nil, func(e *E) any { return &e.TemporalCAFile }},
		{"temporal-server-name", "TRAWLER_TEMPORAL_SERVER_NAME", "name to verify the Temporal frontend's certificate against (default: the --temporal host)", &a.temporalServerName, nil, func(e *E) any { return &e.TemporalServerName }},
		{"temporal-api-key-file", "TRAWLER_TEMPORAL_API_KEY_FILE", "file holding a Temporal API key (Temporal Cloud); turns TLS on", &a.temporalAPIKeyFile, nil, func(e *E) any { return &e.TemporalAPIKeyFile }},
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

// resolve fills what no flag set from the environment, then from ep (nil when no
// endpoints.json was read).
func (a *authSettings) resolve(ep *endpoints.Endpoints) error {
	for _, r := range a.table() {
		v := os.Getenv(r.env)
		if r.boolean != nil {
			if *r.boolean {
				continue
			}
			if v != "" {
				switch strings.ToLower(v) {
				case "1", "true", "yes", "on":
					*r.boolean = true
				case "0", "false", "no", "off":
				default:
					return fmt.Errorf("%s=%s: want true or false", r.env, v)
				}
				continue
			}
			if ep != nil {
				*r.boolean = *r.ep(ep).(*bool)
			}
			continue
		}
		if *r.str != "" {
			continue
		}
		if v == "" && ep != nil {
			v = *r.ep(ep).(*string)
		}
		*r.str = v
	}
	return nil
}

// resolveAuth resolves only the credential settings, for commands that need no
// Temporal (search): flags, environment, then --data's endpoints.json when there is one.
func (s *settings) resolveAuth() error {
	data := s.dataDir("")
	var ep *endpoints.Endpoints
	if data != "" {
		if e, err := endpoints.Read(data); err == nil {
			ep = &e
		}
	}
	return s.auth.resolve(ep)
}

// redisOptions are the password and CA of --redis.
func (s *settings) redisOptions() (redisurl.Options, error) {
	pw, err := credentials.Secret("--redis-password-file", s.auth.redisPasswordFile)
	return redisurl.Options{Password: pw, CAFile: s.auth.redisCAFile}, err
}

// storeAuth reads the Kafka and Elasticsearch credentials of the settings.
func (s *settings) storeAuth() (engine.StoreAuth, error) {
	k, err := s.kafkaAuth()
	if err != nil {
		return engine.StoreAuth{}, err
	}
	e, err := s.esAuth()
	return engine.StoreAuth{Kafka: k, ES: e}, err
}

func (s *settings) kafkaAuth() (kafka.Auth, error) {
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
func (s *settings) esAuth() (es.Auth, error) {
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
func (s *settings) temporalAuth() (engine.TemporalAuth, error) {
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
