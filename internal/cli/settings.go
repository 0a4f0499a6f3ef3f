package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// Where a setting's value came from, as `trawler config show` names it.
const (
	fromFlag      = "flag"
	fromEnv       = "env"
	fromEndpoints = "endpoints.json"
	fromDefault   = "default"
)

// storeOff is the value that leaves a store out (--es none): a stack's endpoints.json
// names every store, and a run may want fewer of them.
const storeOff = "none"

// isStore reports whether flag is a store's address, which storeOff can leave out.
func isStore(flag string) bool {
	return flag == "kafka" || flag == "mongo" || flag == "es" || flag == "hbase"
}

// setting is one row of the settings table: a string or a bool setting, its flag,
// environment variable, endpoints.json field (nil: none) and default (nil: none).
// Every row resolves by the same rule: the flag, else the environment variable, else
// the endpoints.json of the --data directory, else the default.
type setting struct {
	flag, env, usage string // usage: help of a flag the table registers (authSettings)
	str              *string
	boolean          *bool
	ep               func(*endpoints.Endpoints) any // the string or bool in the file
	def              func() string
}

// table lists every setting, --data first: the others may come from its endpoints.json.
func (s *Settings) table() []setting {
	type E = endpoints.Endpoints
	rows := []setting{
		{flag: "data", env: "TRAWLER_DATA", str: &s.Data},
		{flag: "temporal", env: "TRAWLER_TEMPORAL", str: &s.Temporal, ep: func(e *E) any { return e.Temporal }, def: func() string { return "127.0.0.1:7233" }},
		{flag: "namespace", env: "TRAWLER_NAMESPACE", str: &s.Namespace, ep: func(e *E) any { return e.Namespace }, def: func() string { return "default" }},
		{flag: "task-queue", env: "TRAWLER_TASK_QUEUE", str: &s.TaskQueue, def: func() string { return workflows.DefaultTaskQueue }},
		{flag: "out", env: "TRAWLER_OUT", str: &s.Out, def: func() string {
			if s.Data == "" {
				return ""
			}
			return filepath.Join(s.Data, "out")
		}},
		{flag: "redis", env: "TRAWLER_REDIS", str: &s.Redis, ep: func(e *E) any { return e.Redis }},
		{flag: "kafka", env: "TRAWLER_KAFKA", str: &s.Kafka, ep: func(e *E) any { return strings.Join(e.Kafka, ",") }},
		{flag: "mongo", env: "TRAWLER_MONGO", str: &s.Mongo, ep: func(e *E) any { return e.Mongo }},
		{flag: "es", env: "TRAWLER_ES", str: &s.ES, ep: func(e *E) any { return e.ES }},
		{flag: "hbase", env: "TRAWLER_HBASE", str: &s.HBase, ep: func(e *E) any { return e.HBaseZK }},
	}
	rows = append(rows, s.auth.table()...)
	return append(rows, s.earlyTable()...)
}

// earlyTable lists the settings every command applies before it runs, resolved then
// (without endpoints.json, which they are not in).
func (s *Settings) earlyTable() []setting {
	return []setting{
		{flag: "otlp", env: "TRAWLER_OTLP", str: &s.otlp},
		{flag: "secret-params", env: "TRAWLER_SECRET_PARAMS", str: &s.secretParams},
	}
}

// resolve fills every setting by the rule of the table, from --data's endpoints.json
// when --data (or TRAWLER_DATA) names one. The file must be readable when Temporal is
// to come from it; otherwise a missing file only means no stack values. resolve may run
// again (follow re-reads the file after a stack restart): what the last run filled in
// is resolved anew, what a flag set is kept.
func (s *Settings) Resolve() error {
	rows := s.table()
	if err := s.apply(rows[:1], nil); err != nil {
		return err
	}
	ep, err := s.readEndpoints()
	if err != nil {
		s.forget(rows[1:2])
		if s.Temporal == "" && os.Getenv("TRAWLER_TEMPORAL") == "" {
			return err
		}
	}
	if ep != nil {
		// The stack's addresses fill chain files' ${demo_site} … even when --temporal
		// points elsewhere.
		StackVars = ep.Vars()
	}
	if err := s.apply(rows[1:], ep); err != nil {
		return err
	}
	if s.auth.mongoPasswordFile != "" {
		// Idempotent: resolve may run more than once.
		uri, err := withMongoPassword(s.Mongo, s.auth.mongoPasswordFile)
		if err != nil {
			return err
		}
		s.Mongo = uri
	}
	return nil
}

// resolveOffline resolves every setting by the same rule for commands that talk to no
// Temporal (search, export from Elasticsearch): a --data without a running stack only
// means no values from it.
func (s *Settings) resolveOffline() error {
	rows := s.table()
	if err := s.apply(rows[:1], nil); err != nil {
		return err
	}
	ep, _ := s.readEndpoints()
	return s.apply(rows[1:], ep)
}

// readEndpoints reads --data's endpoints.json; nil without --data.
func (s *Settings) readEndpoints() (*endpoints.Endpoints, error) {
	if s.Data == "" {
		return nil, nil
	}
	ep, err := endpoints.Read(s.Data)
	if err != nil {
		return nil, err
	}
	return &ep, nil
}

// forget clears what an earlier resolve filled into rows, keeping what a flag set.
func (s *Settings) forget(rows []setting) {
	for _, r := range rows {
		if src, ok := s.sources[r.flag]; !ok || src == fromFlag {
			if ok && s.off[r.flag] {
				*r.str = storeOff // what the flag said, for resolve to find again
			}
			continue
		}
		delete(s.off, r.flag)
		if r.boolean != nil {
			*r.boolean = false
		} else {
			*r.str = ""
		}
		delete(s.sources, r.flag)
	}
}

// apply resolves rows: a value already set came from its flag, else the environment
// variable, else ep (nil: no endpoints.json), else the default. It records each
// value's source for `trawler config show`.
func (s *Settings) apply(rows []setting, ep *endpoints.Endpoints) error {
	s.forget(rows)
	if s.sources == nil {
		s.sources = map[string]string{}
	}
	for _, r := range rows {
		src, err := r.resolve(ep)
		if err != nil {
			return err
		}
		if isStore(r.flag) && *r.str == storeOff {
			if s.off == nil {
				s.off = map[string]bool{}
			}
			*r.str, s.off[r.flag] = "", true
		}
		s.sources[r.flag] = src
	}
	return nil
}

// resolve fills r by the rule and says where its value came from.
func (r setting) resolve(ep *endpoints.Endpoints) (string, error) {
	env := os.Getenv(r.env)
	var file any
	if ep != nil && r.ep != nil {
		file = r.ep(ep)
	}
	if r.boolean != nil {
		switch {
		case *r.boolean:
			return fromFlag, nil
		case env != "":
			switch strings.ToLower(env) {
			case "1", "true", "yes", "on":
				*r.boolean = true
			case "0", "false", "no", "off":
			default:
				return "", fmt.Errorf("%s=%s: want true or false", r.env, env)
			}
			return fromEnv, nil
		case file == true:
			*r.boolean = true
			return fromEndpoints, nil
		}
		return fromDefault, nil
	}
	switch {
	case *r.str != "":
		return fromFlag, nil
	case env != "":
		*r.str = env
		return fromEnv, nil
	case file != nil && file != "":
		*r.str = file.(string)
		return fromEndpoints, nil
	case r.def != nil:
		*r.str = r.def()
	}
	return fromDefault, nil
}

// dataDir is --data, else TRAWLER_DATA, else def: for commands that use the directory
// without resolving the other settings (dev, demo, bench).
func (s *Settings) DataDir(def string) string {
	if s.Data != "" {
		return s.Data
	}
	if d := os.Getenv("TRAWLER_DATA"); d != "" {
		return d
	}
	return def
}
