package crawl

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Archive keeps the raw HTTP exchanges of a step's pages as WARC files (`archive:` on
// a step or under defaults; internal/archive writes them).
type Archive struct {
	// To is where the WARC files and their CDXJ indexes go: an absolute directory, or a
	// file:// or s3:// URL (gocloud.dev/blob).
	To string `json:"to"`
	// MaxMB and MaxAge finish the WARC file being written once it holds this many
	// megabytes (compressed) or is this old, and start the next.
	MaxMB  int           `json:"max_mb,omitempty"`
	MaxAge time.Duration `json:"max_age,omitempty"`
}

// Archive defaults: a file of about 1 GB (the size Heritrix and most WARC tools
// expect), finished after 10 minutes at most so what a run fetched is readable soon.
const (
	DefaultArchiveMaxMB  = 1024
	DefaultArchiveMaxAge = 10 * time.Minute
)

// ArchiveSchemes are the destinations `archive.to` takes besides a plain directory.
var ArchiveSchemes = []string{"file", "s3"}

var archiveKeys = []string{"to", "max_mb", "max_age"}

// archiveSecretParams are query parameters that would put a credential in a chain file.
var archiveSecretParams = []string{"access_key", "access_key_id", "secret", "secret_key", "secret_access_key", "session_token", "token", "password"}

// archive reads an `archive:` mapping.
func (l *loader) archive(v *yaml.Node, where string) *Archive {
	a := &Archive{MaxMB: DefaultArchiveMaxMB, MaxAge: DefaultArchiveMaxAge}
	lines := map[string]int{}
	l.fields(v, where+".archive", archiveKeys, func(key string, v *yaml.Node) {
		lines[key] = v.Line
		switch key {
		case "to":
			a.To = l.str(v, "archive.to")
		case "max_mb":
			if a.MaxMB = l.integer(v, "archive.max_mb"); a.MaxMB < 1 && v.Kind == yaml.ScalarNode {
				l.add(v.Line, "%s: archive.max_mb %s: use 1 or more megabytes per WARC file (default %d)", where, v.Value, DefaultArchiveMaxMB)
			}
		case "max_age":
			a.MaxAge = l.duration(v, "archive.max_age")
		}
	})
	if v.Kind != yaml.MappingNode {
		return nil
	}
	line, ok := lines["to"]
	if !ok {
		l.add(v.Line, "%s: archive needs `to:`, where the WARC files go: an absolute directory, file:///DIR or s3://BUCKET/PREFIX", where)
		return nil
	}
	if err := CheckArchiveTo(a.To); err != nil {
		l.add(line, "%s: archive.to: %v", where, err)
	}
	return a
}

// CheckArchiveTo checks an `archive.to`: an absolute directory, or a URL of a scheme
// the worker writes to, with a bucket and without credentials (workers take those from
// their environment, never from a chain file).
func CheckArchiveTo(to string) error {
	if to == "" {
		return fmt.Errorf("empty; write an absolute directory, file:///DIR or s3://BUCKET/PREFIX")
	}
	if !strings.Contains(to, "://") {
		if !filepath.IsAbs(to) {
			return fmt.Errorf("%q is a relative directory, and each worker would resolve it where it runs; write an absolute one, e.g. /var/lib/trawler/warc", to)
		}
		return nil
	}
	u, err := url.Parse(to)
	if err != nil {
		return fmt.Errorf("%q is no URL (%v); write file:///DIR or s3://BUCKET/PREFIX", RedactURL(to), err)
	}
	shown := RedactURL(to)
	if !slices.Contains(ArchiveSchemes, u.Scheme) {
		return fmt.Errorf("%s: %s:// is not a destination for WARC files; use an absolute directory, file:///DIR or s3://BUCKET/PREFIX (gs:// and azblob:// need their gocloud.dev driver built in)", shown, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%s carries a user or password; credentials never go in a chain file: give the worker AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_SHARED_CREDENTIALS_FILE) in its environment", shown)
	}
	for name := range u.Query() {
		for _, secret := range archiveSecretParams {
			if strings.EqualFold(name, secret) {
				return fmt.Errorf("the URL carries the credential parameter %s; credentials never go in a chain file: give the worker AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_SHARED_CREDENTIALS_FILE) in its environment", name)
			}
		}
	}
	switch u.Scheme {
	case "s3":
		if u.Host == "" {
			return fmt.Errorf("%s names no bucket; write s3://BUCKET/PREFIX?region=REGION", shown)
		}
	case "file":
		if u.Host != "" || !filepath.IsAbs(u.Path) {
			return fmt.Errorf("%s: a file URL names an absolute directory with three slashes, e.g. file:///var/lib/trawler/warc", shown)
		}
	}
	return nil
}

// Reparse has a step answer its requests from the pages a run archived instead of the
// network (`trawler reparse`): internal/archive reads them, by canonical URL, through
// the run's CDXJ index at From.
type Reparse struct {
	// From is the archive's destination (an `archive.to`); Run the run whose pages
	// answer, of the plan's tenant.
	From string `json:"from"`
	Run  string `json:"run"`
	// URL (a regular expression) and Since and Until (when the page was fetched) narrow
	// the pages that answer; any other page is not in the archive.
	URL   string    `json:"url,omitempty"`
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// FetchMissing fetches a page that is not in the archive; without it the page
	// fails with CauseNotArchived.
	FetchMissing bool `json:"fetch_missing,omitempty"`
}
