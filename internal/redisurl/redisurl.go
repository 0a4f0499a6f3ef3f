// Package redisurl opens the Redis that a --redis setting names. It is the one place
// that understands the address forms, so the worker, the console and every command
// that talks to Redis accept the same ones:
//
//	host:port                                         one server, no password
//	redis://[user:password@]host:port[/db][?opts]     one server (go-redis ParseURL)
//	rediss://…                                        the same over TLS
//	unix:///path/redis.sock[?db=N]                    a local socket
//	redis-sentinel://[user:password@]h1:26379,h2:26379/mymaster[?db=N&sentinel_auth=1]
//	rediss-sentinel://…                               the same over TLS
//	redis-cluster://[user:password@]h1:6379,h2:6379[?opts]
//	rediss-cluster://…                                the same over TLS
//
// For Sentinel, the user and password authenticate to the master (and replicas);
// sentinel_auth=1 sends them to the sentinels too, for sentinels with requirepass. Any
// other query option is go-redis's own (dial_timeout=3s, pool_size=20 …). Options.Password
// (from --redis-password-file) replaces the address's password, so the secret need not
// be in the address, where process lists and shell histories would show it.
//
// Clients are redis.UniversalClient: *redis.Client, *redis.ClusterClient or the
// failover client. What Trawler keeps in Redis works on all three, because no command,
// script or MULTI/EXEC block spans hash slots (see internal/redisops and the README's
// Redis Cluster).
package redisurl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/credentials"
)

// Options complete an address with what does not belong in it.
type Options struct {
	// Password replaces the address's password (read from --redis-password-file).
	Password string
	// CAFile is the PEM CA that signed the servers' certificates, for rediss
	// addresses (--redis-ca-file); default the system roots.
	CAFile string
	// DialTimeout and PoolSize tune the client; zero keeps the address's or go-redis's
	// defaults.
	DialTimeout time.Duration
	PoolSize    int
}

// Kind is the topology an address names.
type Kind int

const (
	Single   Kind = iota // one server: host:port, redis://, rediss://, unix://
	Sentinel             // a master found through sentinels
	Cluster              // a Redis Cluster
)

// Target is a parsed address: exactly one of the option sets is filled, as Kind says.
type Target struct {
	Kind     Kind
	Single   *redis.Options
	Failover *redis.FailoverOptions
	Cluster  *redis.ClusterOptions
}

// hint ends every parse error: the forms that work.
const hint = "give host:port, redis://[user:password@]host:port[/db], rediss://…, redis-sentinel://[user:password@]h1:26379,h2:26379/MASTER or redis-cluster://[user:password@]h1:6379,h2:6379"

// Parse reads an address (see the package doc) and applies o. Errors quote the address
// with its password masked.
func Parse(addr string, o Options) (*Target, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("no Redis address: " + hint)
	}
	shown := Shown(addr)
	scheme, _, hasScheme := strings.Cut(addr, "://")
	var t *Target
	var err error
	switch {
	case !hasScheme:
		t, err = parseHostPort(addr)
	case scheme == "redis" || scheme == "rediss" || scheme == "unix":
		var so *redis.Options
		if _, perr := url.Parse(addr); perr != nil {
			err = errors.New("not a URL (a password with : / @ ? # % must be percent-encoded, or given with --redis-password-file)")
		} else if so, err = redis.ParseURL(addr); err == nil {
			t = &Target{Kind: Single, Single: so}
		}
	case scheme == "redis-sentinel" || scheme == "rediss-sentinel":
		t, err = parseSentinel(addr, scheme == "rediss-sentinel")
	case scheme == "redis-cluster" || scheme == "rediss-cluster":
		t, err = parseCluster(addr, scheme == "rediss-cluster")
	default:
		err = fmt.Errorf("unknown scheme %q", scheme)
	}
	if err != nil {
		// The parsers never see a password in a string they could quote (url.Parse
		// errors are replaced above), so err is safe to show.
		//lint:ignore ST1005 starts with the name of the store, as users know it
		return nil, fmt.Errorf("Redis address %s: %v; %s", shown, err, hint)
	}
	if err := t.apply(o); err != nil {
		//lint:ignore ST1005 starts with the name of the store, as users know it
		return nil, fmt.Errorf("Redis address %s: %w", shown, err)
	}
	return t, nil
}

func parseHostPort(addr string) (*Target, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		if strings.Contains(addr, "@") {
			return nil, errors.New("a password needs the URL form: redis://HOST:PORT (redis://USER@HOST:PORT for an ACL user) with the password in --redis-password-file")
		}
		return nil, errors.New("want host:port")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return &Target{Kind: Single, Single: &redis.Options{Addr: net.JoinHostPort(host, port)}}, nil
}

// multi splits scheme://[userinfo@]h1,h2,…/path?query, which net/url cannot parse
// (several hosts), into its user info, hosts, path and query.
func multi(addr string) (user *url.Userinfo, hosts []string, path string, q url.Values, err error) {
	scheme, rest, _ := strings.Cut(addr, "://")
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	hostList := authority
	info := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		info, hostList = authority[:at+1], authority[at+1:]
	}
	// Parse the rest with one stand-in host, so net/url decodes user info, path and
	// query as in any URL.
	u, perr := url.Parse(scheme + "://" + info + "host" + tail)
	if perr != nil {
		return nil, nil, "", nil, errors.New("not a URL (a password with : / @ ? # % must be percent-encoded, or given with --redis-password-file)")
	}
	for _, h := range strings.Split(hostList, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, p, err := net.SplitHostPort(h); err != nil || p == "" {
			return nil, nil, "", nil, fmt.Errorf("%q is not host:port", h)
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, nil, "", nil, errors.New("no host:port")
	}
	return u.User, hosts, u.Path, u.Query(), nil
}

func userPassword(u *url.Userinfo) (string, string) {
	if u == nil {
		return "", ""
	}
	p, _ := u.Password()
	return u.Username(), p
}

// goRedisURL is the URL go-redis's ParseFailoverURL and ParseClusterURL read: the
// first host, the others as addr options, and the tuning options. The credentials are
// set on the parsed options instead, never put in a URL that an error could quote.
func goRedisURL(hosts []string, q url.Values, useTLS bool, path string) string {
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	scheme := "redis"
	if useTLS {
		scheme = "rediss"
	}
	return scheme + "://" + hosts[0] + path + "?" + q.Encode()
}

func parseSentinel(addr string, useTLS bool) (*Target, error) {
	user, hosts, path, q, err := multi(addr)
	if err != nil {
		return nil, err
	}
	master := strings.Trim(path, "/")
	if master == "" || strings.Contains(master, "/") {
		return nil, errors.New("name the master after the sentinels: redis-sentinel://h1:26379,h2:26379/MASTER")
	}
	sentinelAuth := q.Get("sentinel_auth")
	q.Del("sentinel_auth")
	q.Set("master_name", master)
	fo, err := redis.ParseFailoverURL(goRedisURL(hosts, q, useTLS, "/"))
	if err != nil {
		return nil, err
	}
	fo.Username, fo.Password = userPassword(user)
	switch sentinelAuth {
	case "", "0", "false":
	case "1", "true":
		fo.SentinelUsername, fo.SentinelPassword = fo.Username, fo.Password
	default:
		return nil, fmt.Errorf("sentinel_auth=%s: want 1 or 0", sentinelAuth)
	}
	return &Target{Kind: Sentinel, Failover: fo}, nil
}

func parseCluster(addr string, useTLS bool) (*Target, error) {
	user, hosts, path, q, err := multi(addr)
	if err != nil {
		return nil, err
	}
	if strings.Trim(path, "/") != "" {
		return nil, errors.New("a Redis Cluster has only database 0: drop the path")
	}
	co, err := redis.ParseClusterURL(goRedisURL(hosts, q, useTLS, ""))
	if err != nil {
		return nil, err
	}
	co.Username, co.Password = userPassword(user)
	return &Target{Kind: Cluster, Cluster: co}, nil
}

// apply sets what Options carry on the parsed options.
func (t *Target) apply(o Options) error {
	tlsc := t.tls()
	if o.CAFile != "" {
		if *tlsc == nil {
			return errors.New("--redis-ca-file is for TLS: use rediss://, rediss-sentinel:// or rediss-cluster://")
		}
		c, err := credentials.TLSFiles{CAFile: o.CAFile, CAFlag: "--redis-ca-file"}.Config()
		if err != nil {
			return err
		}
		(*tlsc).RootCAs = c.RootCAs
	}
	if *tlsc != nil && t.Kind != Single {
		// go-redis names the first host as the server name; with several servers let
		// each connection verify the host it dials.
		(*tlsc).ServerName = ""
	}
	switch t.Kind {
	case Single:
		if o.Password != "" {
			t.Single.Password = o.Password
		}
		t.Single.DialTimeout = pick(o.DialTimeout, t.Single.DialTimeout)
		t.Single.PoolSize = pick(o.PoolSize, t.Single.PoolSize)
	case Sentinel:
		if o.Password != "" {
			if t.Failover.SentinelPassword != "" {
				t.Failover.SentinelPassword = o.Password
			}
			t.Failover.Password = o.Password
		}
		t.Failover.DialTimeout = pick(o.DialTimeout, t.Failover.DialTimeout)
		t.Failover.PoolSize = pick(o.PoolSize, t.Failover.PoolSize)
	case Cluster:
		if o.Password != "" {
			t.Cluster.Password = o.Password
		}
		t.Cluster.DialTimeout = pick(o.DialTimeout, t.Cluster.DialTimeout)
		t.Cluster.PoolSize = pick(o.PoolSize, t.Cluster.PoolSize)
	}
	return nil
}

func pick[T comparable](v, def T) T {
	var zero T
	if v != zero {
		return v
	}
	return def
}

func (t *Target) tls() **tls.Config {
	switch t.Kind {
	case Sentinel:
		return &t.Failover.TLSConfig
	case Cluster:
		return &t.Cluster.TLSConfig
	}
	return &t.Single.TLSConfig
}

// Client returns a client for the target; it connects on first use.
func (t *Target) Client() redis.UniversalClient {
	switch t.Kind {
	case Sentinel:
		return redis.NewFailoverClient(t.Failover)
	case Cluster:
		return redis.NewClusterClient(t.Cluster)
	}
	return redis.NewClient(t.Single)
}

// Open parses addr and returns its client, which connects on first use: a server that
// is down or a wrong password shows in the first command (or in Ping).
func Open(addr string, o Options) (redis.UniversalClient, error) {
	t, err := Parse(addr, o)
	if err != nil {
		return nil, err
	}
	return t.Client(), nil
}

// Ping checks that the server answers and takes the credentials, with an error that
// names the address (password masked) and, for a refused password, the settings to fix.
func Ping(ctx context.Context, c redis.UniversalClient, addr string) error {
	err := c.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	return Explain(addr, err)
}

// Explain turns an error of a command on the Redis at addr into one a person can act
// on: the address with its password masked and, when the server refused the
// credentials, where they come from.
func Explain(addr string, err error) error {
	if err == nil {
		return nil
	}
	msg := crawl.RedactText(err.Error())
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "invalid password"),
		strings.Contains(msg, "AUTH <password> called without"), strings.Contains(msg, "NOPERM"):
		//lint:ignore ST1005 starts with the name of the store, as users know it
		return fmt.Errorf("Redis at %s refused the credentials: %s\n  give the password with --redis-password-file (TRAWLER_REDIS_PASSWORD_FILE) or in the URL, redis://[user]:PASSWORD@host:port", Shown(addr), msg)
	}
	//lint:ignore ST1005 starts with the name of the store, as users know it
	return fmt.Errorf("Redis at %s: %s", Shown(addr), msg)
}

// Shown is addr as messages may quote it: the password of a URL masked, and the user
// info of a mistaken user:password@host:port (no scheme) masked whole.
func Shown(addr string) string {
	if !strings.Contains(addr, "://") {
		if at := strings.LastIndex(addr, "@"); at >= 0 {
			return crawl.Masked + addr[at:]
		}
	}
	return crawl.RedactURL(addr)
}
