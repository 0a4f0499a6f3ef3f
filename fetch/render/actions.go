package render

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/credentials"
)

// ActionOutcome is what one action of render.actions did, for a person watching
// (`trawler try --render`).
type ActionOutcome struct {
	Path   string        // render.actions[2], render.actions[3].repeat.do[0]
	Action string        // click "#more"; a fill's value is never in it
	Took   time.Duration //
	Note   string        // skipped, rounds run, why a loop stopped
	Err    error
	// Screenshot is the PNG taken after the action, when Renderer.ActionShots asks.
	Screenshot string
}

// keys are the names `press:` knows, as the browser's key codes.
var keys = map[string]string{
	"Enter": kb.Enter, "Tab": kb.Tab, "Escape": kb.Escape, "Backspace": kb.Backspace, "Delete": kb.Delete, "Space": " ",
	"ArrowUp": kb.ArrowUp, "ArrowDown": kb.ArrowDown, "ArrowLeft": kb.ArrowLeft, "ArrowRight": kb.ArrowRight,
	"PageUp": kb.PageUp, "PageDown": kb.PageDown, "Home": kb.Home, "End": kb.End,
}

// actionSettle is how long an action's own requests get to start before the network
// is watched for going idle.
const actionSettle = 100 * time.Millisecond

// act runs actions in order. The first that fails fails the page with cause action,
// named by its path and selector; deadline is the page's render.timeout.
func (pg *pageRun) act(ctx context.Context, deadline time.Time, acts []crawl.Action, path string) error {
	for i, a := range acts {
		p := fmt.Sprintf("%s[%d]", path, i)
		start := time.Now()
		note, err := pg.action(ctx, deadline, a, p)
		// A failed action inside a repeat names itself already.
		if c := crawl.CauseOf(err); err != nil && !pg.hung.Load() && c != crawl.CauseCanceled && c != crawl.CauseAction {
			err = crawl.WithCause(fmt.Errorf("%s %s: %w", p, a, err), crawl.CauseAction)
		}
		if obs := pg.r.Observe; obs != nil {
			out := ActionOutcome{Path: p, Action: a.String(), Took: time.Since(start), Note: note, Err: err}
			if pg.r.ActionShots != "" && !pg.hung.Load() {
				out.Screenshot, _ = pg.screenshot(ctx, pg.r.ActionShots, p)
			}
			obs(out)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// action runs one action and says what it did when that is worth a note.
func (pg *pageRun) action(ctx context.Context, deadline time.Time, a crawl.Action, path string) (string, error) {
	// A loop is bounded by its rounds and the page's deadline, each of its actions by
	// its own timeout.
	timeout := cmp.Or(a.Timeout, crawl.DefaultActionTimeout)
	adl := deadline
	if (a.Kind != crawl.ActionRepeat || a.Timeout > 0) && time.Now().Add(timeout).Before(deadline) {
		adl = time.Now().Add(timeout)
	}
	sel, _ := json.Marshal(a.Selector)
	// find waits for the selector; an optional action that finds nothing is skipped.
	find := func() (skip bool, err error) {
		found, err := pg.waitFor(ctx, adl, `document.querySelector(`+string(sel)+`) !== null`)
		switch {
		case err != nil:
			return false, err
		case found:
			return false, nil
		case a.Optional:
			return true, nil
		case adl.Equal(deadline):
			return false, fmt.Errorf("nothing matches %q before render.timeout %s ran out", a.Selector, pg.r.Opts.Timeout)
		}
		return false, fmt.Errorf("nothing matches %q within %s (the action's timeout)", a.Selector, timeout)
	}
	const skipped = "skipped: nothing matches (optional)"
	switch a.Kind {
	case crawl.ActionClick, crawl.ActionFill, crawl.ActionSelect, crawl.ActionWaitFor:
		if skip, err := find(); err != nil || skip {
			return map[bool]string{true: skipped}[skip], err
		}
	case crawl.ActionScroll:
		if a.Selector != "" {
			if skip, err := find(); err != nil || skip {
				return map[bool]string{true: skipped}[skip], err
			}
		}
	}
	value, err := pg.fillValue(a)
	if err != nil {
		return "", err
	}
	val, _ := json.Marshal(value)
	switch a.Kind {
	case crawl.ActionClick:
		err = pg.eval(ctx, adl, `(() => { const e = document.querySelector(`+string(sel)+`); e.scrollIntoView({block: "center"}); e.click(); })()`, nil)
	case crawl.ActionFill, crawl.ActionSelect:
		// The value is set the way typing would: through the element's own setter (which
		// frameworks watch), then input and change events.
		var ok bool
		err = pg.eval(ctx, adl, `((e, v) => {
  if (e.tagName === "SELECT") {
    const o = [...e.options].find(o => o.value === v || o.text.trim() === v);
    if (!o) return false;
    v = o.value;
  }
  e.focus();
  const set = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(e), "value");
  if (set && set.set) set.set.call(e, v); else e.value = v;
  e.dispatchEvent(new Event("input", {bubbles: true}));
  e.dispatchEvent(new Event("change", {bubbles: true}));
  return true;
})(document.querySelector(`+string(sel)+`), `+string(val)+`)`, &ok)
		if err == nil && !ok {
			return "", fmt.Errorf("%q has no option with that value or text", a.Selector)
		}
	case crawl.ActionPress:
		err = pg.call(ctx, adl, chromedp.KeyEvent(keyOf(a.Value)))
	case crawl.ActionScroll:
		script := `window.scrollTo(0, document.scrollingElement.scrollHeight)`
		if a.Selector != "" {
			script = `document.querySelector(` + string(sel) + `).scrollIntoView({block: "end"})`
		}
		err = pg.eval(ctx, adl, script, nil)
	case crawl.ActionWaitFor:
		return "", nil
	case crawl.ActionWait:
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Until(adl)):
		}
		return "", nil
	case crawl.ActionScript:
		err = pg.eval(ctx, adl, a.Value, nil)
	case crawl.ActionRepeat:
		return pg.repeat(ctx, adl, a, path)
	}
	if err != nil {
		return "", err
	}
	pg.quiet(ctx, adl)
	return "", nil
}

// repeat runs a loop's actions until its condition holds, at most Max rounds; a loop
// that reaches Max ends there (the page is read as it is) with a note saying so.
//
// A round's actions wait for the requests they start, but a page may start loading
// only later (a debounce, a timer, a spinner first): a round that has not changed the
// page yet waits up to a second (no_change: its own wait) for a change before it is
// judged, so a list that loads late is neither taken for finished nor clicked again
// and again while it loads.
func (pg *pageRun) repeat(ctx context.Context, deadline time.Time, a crawl.Action, path string) (string, error) {
	u := a.Until
	var cond string
	switch {
	case u.Count != "":
		sel, _ := json.Marshal(u.Count)
		cond = fmt.Sprintf(`document.querySelectorAll(%s).length >= %d`, sel, u.AtLeast)
	case u.Gone != "":
		sel, _ := json.Marshal(u.Gone)
		cond = `document.querySelector(` + string(sel) + `) === null`
	}
	held := func() (bool, error) {
		var ok bool
		err := pg.eval(ctx, deadline, cond, &ok)
		return ok, err
	}
	grace := cmp.Or(u.NoChangeFor, crawl.DefaultNoChangeFor)
	for round := 1; round <= a.Max; round++ {
		var before string
		if err := pg.eval(ctx, deadline, pageShape, &before); err != nil {
			return "", err
		}
		if err := pg.act(ctx, deadline, a.Do, path+".repeat.do"); err != nil {
			return "", err
		}
		done := false
		var err error
		if !u.NoChange {
			if done, err = held(); err != nil {
				return "", err
			}
		}
		if !done {
			var changed bool
			if changed, err = pg.changedSince(ctx, deadline, before, grace); err != nil {
				return "", err
			}
			switch {
			case u.NoChange:
				done = !changed
			case changed:
				if done, err = held(); err != nil {
					return "", err
				}
			}
		}
		if done {
			return fmt.Sprintf("until held after %d rounds", round), nil
		}
	}
	return fmt.Sprintf("stopped on max: %d rounds ran and until never held", a.Max), nil
}

// pageShape is what a round that loaded nothing leaves as it was: the page's height and
// its number of elements.
const pageShape = `document.documentElement.scrollHeight + ":" + document.getElementsByTagName("*").length`

// changedSince reports whether the page's shape differs from before, waiting up to
// grace (within the deadline) for it to; a change that comes is let finish loading.
func (pg *pageRun) changedSince(ctx context.Context, deadline time.Time, before string, grace time.Duration) (bool, error) {
	var now string
	if err := pg.eval(ctx, deadline, pageShape, &now); err != nil || now != before {
		return err == nil, err
	}
	until := time.Now().Add(grace)
	if until.After(deadline) {
		until = deadline
	}
	was, _ := json.Marshal(before)
	changed, err := pg.waitFor(ctx, until, "("+pageShape+") !== "+string(was))
	if changed {
		pg.quiet(ctx, deadline)
	}
	return changed, err
}

// waitFor polls a condition in the page until it holds or the deadline passes.
func (pg *pageRun) waitFor(ctx context.Context, deadline time.Time, cond string) (bool, error) {
	for {
		var ok bool
		if err := pg.eval(ctx, deadline, cond, &ok); err != nil || ok {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quiet gives what an action set off (the XHR of a click, the next page of a scroll)
// time to finish: until the network is idle or the deadline. A page that never goes
// quiet (a stream, polling) just goes on.
func (pg *pageRun) quiet(ctx context.Context, deadline time.Time) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(actionSettle):
	}
	for !pg.idle() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// keyOf is the key code of a `press:` key name or character.
func keyOf(name string) string {
	if k, ok := keys[name]; ok {
		return k
	}
	return name
}

// fillValue is what a fill types: its secret as read when the page began (so what is
// typed is what the page's HAR masks), else its value, or the secret read now, which
// says why it cannot be read.
func (pg *pageRun) fillValue(a crawl.Action) (string, error) {
	if v, ok := pg.secrets[fillSource(a)]; ok {
		return v, nil
	}
	return fillValue(a)
}

// fillSource names where a fill's secret is read from; "" for a value of its own.
func fillSource(a crawl.Action) string {
	switch {
	case a.SecretEnv != "":
		return "env:" + a.SecretEnv
	case a.SecretFile != "":
		return "file:" + a.SecretFile
	}
	return ""
}

// fillValue is what an action types: its value, or the secret it names read on this
// worker — from a file, or from the worker's environment.
func fillValue(a crawl.Action) (string, error) {
	switch {
	case a.SecretEnv != "":
		v := os.Getenv(a.SecretEnv)
		if v == "" {
			return "", fmt.Errorf("secret %s: the variable %s is not set in this worker's environment; set it where the worker starts", a.Secret, a.SecretEnv)
		}
		return v, nil
	case a.SecretFile != "":
		flag := "secret_file"
		if a.Secret != "" {
			flag = "secrets." + a.Secret + ".file"
		}
		return credentials.Secret(flag, a.SecretFile)
	}
	return a.Value, nil
}
