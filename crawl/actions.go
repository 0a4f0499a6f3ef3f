package crawl

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Browser action kinds of `render.actions`.
const (
	ActionClick   = "click"    // click the first element a selector matches
	ActionFill    = "fill"     // type a value into a field
	ActionSelect  = "select"   // choose an option of a <select>
	ActionPress   = "press"    // press a key in the focused element
	ActionScroll  = "scroll"   // scroll to the bottom, or an element into view
	ActionWaitFor = "wait_for" // wait until a selector matches
	ActionWait    = "wait"     // wait a while
	ActionScript  = "script"   // run JavaScript in the page
	ActionRepeat  = "repeat"   // run actions again until a condition holds
)

// ActionKinds lists the kinds, in the order the docs give them.
var ActionKinds = []string{ActionClick, ActionFill, ActionSelect, ActionPress, ActionScroll, ActionWaitFor, ActionWait, ActionScript, ActionRepeat}

// ActionKeys are the keys `press:` knows besides single characters.
var ActionKeys = []string{"Enter", "Tab", "Escape", "Backspace", "Delete", "Space", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown", "Home", "End"}

// DefaultActionTimeout bounds one action (a click waits this long for its element);
// every action also ends within the page's render.timeout.
const DefaultActionTimeout = 5 * time.Second

// DefaultNoChangeFor is how long a round of `until: {no_change: true}` must change
// nothing on the page for the loop to end.
const DefaultNoChangeFor = time.Second

// MaxRepeat bounds a repeat's `max:`.
const MaxRepeat = 1000

// Action is one step of `render.actions`, run on the page after it loaded and before
// its HTML is taken.
type Action struct {
	Kind string `json:"kind"`
	// Selector is the CSS selector of click, fill, select, wait_for, and scroll to an
	// element.
	Selector string `json:"selector,omitempty"`
	// Value is what fill types or select chooses, the key press presses, the script,
	// or "bottom" for scroll. A fill value is never logged or shown.
	Value string `json:"value,omitempty"`
	// SecretFile or SecretEnv is where a fill's value is read on the worker, when the
	// chain file says `{secret: NAME}` (a secret its `secrets:` declares) or
	// `{secret_file: PATH}`: a password then travels in no plan. Secret is the name.
	SecretFile string `json:"secret_file,omitempty"`
	SecretEnv  string `json:"secret_env,omitempty"`
	Secret     string `json:"secret,omitempty"`
	// Param names the step's param a fill types (`{param: NAME}`); the loader puts its
	// value in Value.
	Param string `json:"param,omitempty"`
	// Wait is how long `wait:` waits.
	Wait time.Duration `json:"wait,omitempty"`
	// Optional actions that find nothing are skipped instead of failing the page.
	Optional bool `json:"optional,omitempty"`
	// Timeout bounds the action; 0 is DefaultActionTimeout, and for a repeat the
	// page's render.timeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Do, Until and Max make a repeat: Do runs until Until holds, at most Max times.
	Do    []Action `json:"do,omitempty"`
	Until *Until   `json:"until,omitempty"`
	Max   int      `json:"max,omitempty"`

	line int // in the chain file, for the checks that need the whole render:
}

// Until is when a repeat stops: one of its fields is set.
type Until struct {
	// Count stops once AtLeast elements match Count.
	Count   string `json:"count,omitempty"`
	AtLeast int    `json:"at_least,omitempty"`
	// Gone stops once nothing matches Gone (a "load more" button that went away).
	Gone string `json:"gone,omitempty"`
	// NoChange stops once a round changed nothing on the page (an infinite list at
	// its end) and nothing changed within NoChangeFor after it either: lists that show
	// a spinner first, or wait out a debounce, load after the network went quiet.
	NoChange    bool          `json:"no_change,omitempty"`
	NoChangeFor time.Duration `json:"no_change_for,omitempty"`
}

// String names the action in messages as a user wrote it, without a fill value:
// `click "#more"`, `fill "#password"`, `wait 500ms`.
func (a Action) String() string {
	switch a.Kind {
	case ActionWait:
		return "wait " + a.Wait.String()
	case ActionPress:
		return "press " + a.Value
	case ActionScript:
		return "script"
	case ActionRepeat:
		return "repeat"
	case ActionScroll:
		if a.Selector == "" {
			return "scroll bottom"
		}
	}
	return fmt.Sprintf("%s %q", a.Kind, a.Selector)
}

var (
	actionOptions = []string{"optional", "timeout"}
	repeatKeys    = []string{"do", "until", "max"}
	untilKeys     = []string{"count", "at_least", "gone", "no_change"}
)

// actions reads a list of actions; path is where it sits (render.actions, or
// render.actions[1].repeat.do) for the messages.
func (l *loader) actions(v *yaml.Node, where, path string) []Action {
	if v.Kind != yaml.SequenceNode {
		l.add(v.Line, "%s: %s must be a list of actions (- click: \"#more\"), not a %s", where, path, kindName(v))
		return nil
	}
	var out []Action
	for i, n := range v.Content {
		// One that failed to read stays in its place, so the next ones keep their index.
		a, _ := l.action(n, where, fmt.Sprintf("%s[%d]", path, i))
		out = append(out, a)
	}
	return out
}

// action reads one action: a mapping with one kind key and the options.
func (l *loader) action(n *yaml.Node, where, path string) (Action, bool) {
	a := Action{line: n.Line}
	if n.Kind != yaml.MappingNode {
		l.add(n.Line, "%s: %s must be a mapping such as `click: \"#more\"`, not a %s; actions: %s", where, path, kindName(n), strings.Join(ActionKinds, ", "))
		return a, false
	}
	var kindNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Value == "optional":
			a.Optional = l.boolean(v, path+".optional")
		case k.Value == "timeout":
			a.Timeout = l.duration(v, path+".timeout")
		case slices.Contains(ActionKinds, k.Value):
			if kindNode != nil {
				l.add(k.Line, "%s: %s has two actions, %s and %s; give each its own list item (- %s: …)", where, path, a.Kind, k.Value, k.Value)
				return a, false
			}
			a.Kind, kindNode = k.Value, v
		default:
			l.add(k.Line, "%s: %s: unknown action `%s`%s; actions: %s (and the options %s)", where, path, k.Value, Suggest(k.Value, ActionKinds), strings.Join(ActionKinds, ", "), strings.Join(actionOptions, ", "))
			return a, false
		}
	}
	if kindNode == nil {
		l.add(n.Line, "%s: %s names no action; start it with one of: %s", where, path, strings.Join(ActionKinds, ", "))
		return a, false
	}
	v, field := kindNode, path+"."+a.Kind
	switch a.Kind {
	case ActionClick, ActionWaitFor:
		a.Selector = l.selector(v, where, field)
	case ActionFill, ActionSelect:
		if v.Kind != yaml.MappingNode || len(v.Content) != 2 {
			l.add(v.Line, "%s: %s takes one `SELECTOR: value`, e.g. %s: {\"#email\": \"me@example.com\"}", where, field, a.Kind)
			return a, false
		}
		a.Selector = l.selector(v.Content[0], where, field)
		if val := v.Content[1]; val.Kind == yaml.ScalarNode {
			a.Value = val.Value
		} else if a.Kind == ActionFill {
			l.fields(val, where+": "+field+" value", fillSources, func(key string, v *yaml.Node) {
				switch key {
				case "secret":
					a.Secret = l.str(v, field+".secret")
				case "param":
					a.Param = l.str(v, field+".param")
				case "secret_file":
					a.SecretFile = l.str(v, field+".secret_file")
				}
			})
			switch {
			case val.Kind != yaml.MappingNode:
			case numSet(a.Secret != "", a.Param != "", a.SecretFile != "") != 1:
				l.add(val.Line, "%s: %s: write a value, or one of {secret: NAME} (a secret the chain's secrets: declares), {param: NAME} (one of the step's params) or {secret_file: /absolute/path} (a file the workers read, one line)", where, field)
			case a.SecretFile != "" && !filepath.IsAbs(a.SecretFile):
				l.add(val.Line, "%s: %s: secret_file %q: write the absolute path of the file the workers read the secret from (one line; a trailing newline is dropped)", where, field, a.SecretFile)
			}
		} else {
			l.add(val.Line, "%s: %s: the option to choose is one value (its value or text), not a %s", where, field, kindName(val))
		}
	case ActionPress:
		a.Value = l.str(v, field)
		if v.Kind == yaml.ScalarNode && len([]rune(a.Value)) != 1 && !slices.Contains(ActionKeys, a.Value) {
			l.add(v.Line, "%s: %s %q is not a key%s; press one character or one of: %s", where, field, a.Value, Suggest(a.Value, ActionKeys), strings.Join(ActionKeys, ", "))
		}
	case ActionScroll:
		if s := l.str(v, field); s != "bottom" {
			a.Selector = l.selector(v, where, field)
		}
	case ActionWait:
		a.Wait = l.duration(v, field)
		a.Timeout = max(a.Timeout, a.Wait)
	case ActionScript:
		if a.Value = l.str(v, field); strings.TrimSpace(a.Value) == "" {
			l.add(v.Line, "%s: %s is empty; write the JavaScript to run, or remove the action", where, field)
		}
	case ActionRepeat:
		l.repeat(&a, v, where, field)
	}
	return a, true
}

// selector reads a CSS selector, which must not be empty.
func (l *loader) selector(v *yaml.Node, where, field string) string {
	s := l.str(v, field)
	if v.Kind == yaml.ScalarNode && strings.TrimSpace(s) == "" {
		l.add(v.Line, "%s: %s needs a CSS selector, e.g. \"#more\" or \"button.load\"", where, field)
	}
	return s
}

// repeat reads `repeat: {do: [...], until: {...}, max: N}`: both a condition and a
// bound, so a loop ends when the page is done and also when the page never is.
func (l *loader) repeat(a *Action, v *yaml.Node, where, field string) {
	l.fields(v, where+": "+field, repeatKeys, func(key string, v *yaml.Node) {
		switch key {
		case "do":
			a.Do = l.actions(v, where, field+".do")
		case "until":
			a.Until = &Until{}
			l.fields(v, where+": "+field+".until", untilKeys, func(key string, v *yaml.Node) {
				switch key {
				case "count":
					a.Until.Count = l.selector(v, where, field+".until.count")
				case "at_least":
					a.Until.AtLeast = l.integer(v, field+".until.at_least")
				case "gone":
					a.Until.Gone = l.selector(v, where, field+".until.gone")
				case "no_change":
					// true, or how long a round must change nothing: no_change: 3s.
					a.Until.NoChange, a.Until.NoChangeFor = true, DefaultNoChangeFor
					if v.Kind == yaml.ScalarNode && v.Tag != "!!bool" {
						a.Until.NoChangeFor = l.duration(v, field+".until.no_change")
					} else {
						a.Until.NoChange = l.boolean(v, field+".until.no_change")
					}
				}
			})
			u := a.Until
			switch {
			case numSet(u.Count != "", u.Gone != "", u.NoChange) != 1:
				l.add(v.Line, "%s: %s.until takes one condition: {count: SELECTOR, at_least: N}, {gone: SELECTOR} or {no_change: true}", where, field)
			case u.Count != "" && u.AtLeast < 1:
				l.add(v.Line, "%s: %s.until.count needs at_least: N (1 or more), the number of matches that ends the loop", where, field)
			}
		case "max":
			a.Max = l.integer(v, field+".max")
		}
	})
	if v.Kind != yaml.MappingNode {
		return
	}
	if len(a.Do) == 0 {
		l.add(v.Line, "%s: %s needs do: [actions to repeat], e.g. do: [click: \"#more\"]", where, field)
	}
	if a.Until == nil {
		l.add(v.Line, "%s: %s needs until: {count: SELECTOR, at_least: N}, {gone: SELECTOR} or {no_change: true}, to know when the page is done", where, field)
	}
	if a.Max < 1 || a.Max > MaxRepeat {
		l.add(v.Line, "%s: %s needs max: N (1 to %d), the most rounds to run when until never holds", where, field, MaxRepeat)
	}
}

// checkActions says which actions cannot finish within the page's render.timeout.
func (l *loader) checkActions(acts []Action, r *Render, where, path string) {
	for i, a := range acts {
		p := fmt.Sprintf("%s[%d]", path, i)
		if a.Timeout > r.Timeout {
			l.add(a.line, "%s: %s %s: its timeout %s is longer than render.timeout %s; shorten it or raise render.timeout", where, p, a, a.Timeout, r.Timeout)
		}
		if u := a.Until; u != nil && u.NoChangeFor >= r.Timeout {
			l.add(a.line, "%s: %s.repeat.until.no_change %s leaves no time to scroll within render.timeout %s; shorten it or raise render.timeout", where, p, u.NoChangeFor, r.Timeout)
		}
		l.checkActions(a.Do, r, where, p+".repeat.do")
	}
}

// numSet counts the options of a choice that are set: a choice takes exactly one.
func numSet(options ...bool) int {
	n := 0
	for _, set := range options {
		if set {
			n++
		}
	}
	return n
}
