package crawl

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Notify is a webhook a chain file configures under `notify: {webhooks: [...]}`: the
// events of the chain's runs go to URL (see internal/events, which delivers them).
type Notify struct {
	URL       string   `json:"url"`
	SecretEnv string   `json:"secret_env,omitempty"` // the deliverer's variable holding the signing secret
	Events    []string `json:"events,omitempty"`     // only these types; all when empty
	Format    string   `json:"format,omitempty"`     // "" or "slack"
	Line      int      `json:"-"`
}

// EventTypes are the event types a webhook's `events:` may name (internal/events
// defines each).
var EventTypes = []string{"run_started", "run_finished", "run_failed", "run_paused", "run_resumed", "expectation_broken",
	"outage", "outage_resolved", "backlog", "backlog_resolved", "failure_rate", "failure_rate_resolved", "quota_exhausted"}

var (
	notifyKeys  = []string{"webhooks"}
	webhookKeys = []string{"url", "secret_env", "secret", "events", "format"}
)

// CheckWebhookURL says what is wrong with a webhook URL and how to fix it, or "".
func CheckWebhookURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return "webhook has no url: add `url: https://…`"
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Sprintf("webhook url %q is not an http(s) URL: write it as https://host/path", RedactURL(raw))
	}
	return ""
}

// notify reads `notify:`.
func (l *loader) notify(n *yaml.Node) []Notify {
	var out []Notify
	l.fields(n, "notify", notifyKeys, func(key string, v *yaml.Node) {
		if v.Kind != yaml.SequenceNode {
			l.add(v.Line, "notify.webhooks must be a list (each entry starts with `- url: https://…`), not a %s", kindName(v))
			return
		}
		for _, wn := range v.Content {
			w := Notify{Line: wn.Line}
			urlLine := wn.Line
			l.fields(wn, "a webhook", webhookKeys, func(key string, v *yaml.Node) {
				switch key {
				case "url":
					w.URL, urlLine = l.str(v, "url"), v.Line
				case "secret_env":
					w.SecretEnv = l.str(v, "secret_env")
				case "secret":
					l.add(v.Line, "a webhook's secret is not written in the chain file, where every reader sees it: put it in an environment variable of the workers and write `secret_env: NAME`")
				case "events":
					w.Events = l.strList(v, "events")
					for _, t := range w.Events {
						if !slices.Contains(EventTypes, t) {
							l.add(v.Line, "webhook event %q is not an event type%s; the types are %s", t, Suggest(t, EventTypes), strings.Join(EventTypes, ", "))
						}
					}
				case "format":
					w.Format = l.str(v, "format")
					if w.Format != "slack" {
						l.add(v.Line, "webhook format %q: use `format: slack`, or leave it out for the event as JSON", w.Format)
					}
				}
			})
			if bad := CheckWebhookURL(w.URL); bad != "" {
				l.add(urlLine, "%s", bad)
			}
			out = append(out, w)
		}
	})
	return out
}
