package crawl

import (
	"fmt"
	"regexp"
	"strings"
)

// A biz is what a step's records are stored under: the jsonl file, the Kafka topic,
// the MongoDB collection, the Elasticsearch index, the HBase row prefix and the dedup
// and recrawl namespaces all follow it. It is `site.task` shaped. A step running a Go
// site task stores under the task's name; a step running a config-driven task (one
// whose TaskSpec has a Schema) stores under `<chain>.<step>`, since every chain gives
// that task other fields; `biz:` on the step overrides either.

// bizPartRE is one part of a biz. '-' is left out because Elasticsearch index names
// spell '.' as '-' (shop-a.detail and shop.a-detail would share an index); the parts
// also suit MongoDB collection names, Kafka topics and file names as they are.
var bizPartRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)

// CheckBiz reports whether biz is a valid biz: two parts, site and task, of lowercase
// letters, digits and _, joined by a dot.
func CheckBiz(biz string) error {
	site, task, ok := strings.Cut(biz, ".")
	if !ok || !bizPartRE.MatchString(site) || !bizPartRE.MatchString(task) {
		return fmt.Errorf("%q is no biz: write site.task, two parts of lowercase letters, digits and _ (e.g. shop.detail)", biz)
	}
	return nil
}

// bizPart is a chain name or step id as a part of a biz: lowercase, '-' as '_'.
func bizPart(name string) string { return strings.ReplaceAll(strings.ToLower(name), "-", "_") }

// StepBiz is the biz a step of chain stores its records under: its `biz:`, else
// `<chain>.<step>` (lowercase, '-' as '_') when its task is config-driven, else the task.
func StepBiz(chain string, s Step, spec TaskSpec) string {
	switch {
	case s.Biz != "":
		return s.Biz
	case spec.Schema != nil:
		return bizPart(chain) + "." + bizPart(s.ID)
	}
	return s.Task
}

// RecordBiz is the biz the step's records are stored under. Plans made before steps had
// their own biz name only the task, which was the biz then.
func (s PlanStep) RecordBiz() string {
	if s.Biz != "" {
		return s.Biz
	}
	return s.Task
}

// RecordBiz is the biz the consuming step stores its records under (see PlanStep.RecordBiz).
func (c Consumer) RecordBiz() string {
	if c.Biz != "" {
		return c.Biz
	}
	return c.Task
}
