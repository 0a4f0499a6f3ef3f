package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

// The members' side of the demo site (see internal/devstack/demosite/protected.go):
// farming tasks that fill the cookie and device-id pools, and tasks that read pages only
// a logged-in member on a registered device, or a signed request, may see.
//
//	demo.register_device   → pool:device_id
//	demo.captcha_download → external.captcha_solve → demo.login → pool:cookie
//	demo.signed_feed (needs sign) → demo.member_story (needs cookie, device_id, user_agent)

// Task names of the members' side.
const (
	RegisterDeviceTask  = "demo.register_device"
	CaptchaDownloadTask = "demo.captcha_download"
	LoginTask           = "demo.login"
	SignedFeedTask      = "demo.signed_feed"
	MemberStoryTask     = "demo.member_story"
)

// APISecret is the demo site's key for signed API requests (the site checks it with
// the same external.QuerySignature).
const APISecret = "demo-api-secret"

func init() {
	crawl.Register(RegisterDevice, CaptchaDownload, Login, SignedFeed, MemberStory)
	external.RegisterSigner("demo", external.HMACSigner([]byte(APISecret)))
	external.RegisterBanRule("demo", banRule)
}

// banRule reads the demo site's X-Denied header: a refused cookie or device is banned,
// an overused cookie rests for the Retry-After, and a refused signature is the signer's
// fault, not the cookie's.
func banRule(status int, h http.Header) (external.Verdict, bool) {
	switch h.Get("X-Denied") {
	case "cookie":
		return external.Verdict{Outcome: external.Banned, Kind: external.Cookie}, true
	case "device":
		return external.Verdict{Outcome: external.Banned, Kind: external.DeviceID}, true
	case "overuse":
		d, _ := crawl.ParseRetryAfter(h.Get("Retry-After"), time.Now())
		return external.Verdict{Outcome: external.Throttled, Kind: external.Cookie, Wait: d}, true
	case "signature":
		return external.Verdict{Err: errors.New("the site rejected the request signature (X-Denied: signature); check the signer for site demo")}, true
	case "captcha":
		return external.Verdict{Outcome: external.Released}, true
	}
	return external.Verdict{}, false
}

var (
	usersParam = crawl.Param{Name: "users", Type: crawl.List, Default: []any{"reader1", "reader2", "reader3"},
		Doc: "accounts to log in (reader1 … reader99); users whose session is already in the pool are skipped"}
	countParam = crawl.Param{Name: "count", Type: crawl.Int, Default: 3,
		Doc: "most devices to register in one run; fewer when the pool's target is nearer"}
)

var registerDeviceSpec = crawl.TaskSpec{
	Name:    RegisterDeviceTask,
	Doc:     "register devices on the demo site; store their ids (store: [pool:device_id])",
	Params:  []crawl.Param{baseURLParam, countParam},
	Output:  []crawl.Field{{Name: "value", Type: crawl.String, Doc: "the device id"}},
	Timeout: 20 * time.Second,
	Retries: 3,
}

// RegisterDevice registers devices on the demo site and stores each id (into
// pool:device_id), stopping early when the pool is at its target.
var RegisterDevice = crawl.TaskFunc(registerDeviceSpec, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	spec := registerDeviceSpec
	base, err := baseURL(env, spec)
	if err != nil {
		return crawl.Result{}, err
	}
	n, err := intParam(env, spec, "count")
	if err != nil {
		return crawl.Result{}, err
	}
	want, err := external.Wanted(ctx, env, external.DeviceID, n)
	if err != nil {
		return crawl.Result{}, err
	}
	res := crawl.Result{Skipped: n - want}
	for range want {
		var out struct {
			DeviceID string `json:"device_id"`
		}
		if err := fetchJSON(ctx, env, &crawl.Request{Method: http.MethodPost, URL: base + "/device/register"}, &out); err != nil {
			return crawl.Result{}, err
		}
		res.Items = append(res.Items, crawl.Item{Key: "demo:device:" + out.DeviceID, URL: base + "/device/register",
			Data: map[string]any{"value": out.DeviceID}})
	}
	return res, nil
})

var captchaDownloadSpec = crawl.TaskSpec{
	Name:    CaptchaDownloadTask,
	Doc:     "fetch a login captcha per account the cookie pool lacks; hand each on to be solved",
	Params:  []crawl.Param{baseURLParam, usersParam},
	Timeout: 20 * time.Second,
	Retries: 3,
}

// CaptchaDownload fetches a login captcha for every account whose session the cookie
// pool lacks (up to its target) and hands each on to external.captcha_solve.
var CaptchaDownload = crawl.TaskFunc(captchaDownloadSpec, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	spec := captchaDownloadSpec
	base, err := baseURL(env, spec)
	if err != nil {
		return crawl.Result{}, err
	}
	users, _ := param(env, spec, "users").([]any)
	keys := make([]string, len(users))
	for i, u := range users {
		keys[i] = SessionKey(fmt.Sprint(u))
	}
	missing, err := external.Missing(ctx, env, external.Cookie, keys)
	if err != nil {
		return crawl.Result{}, err
	}
	res := crawl.Result{Skipped: len(users) - len(missing)}
	for _, key := range missing {
		var c struct{ ID, Question string }
		if err := fetchJSON(ctx, env, &crawl.Request{Method: http.MethodGet, URL: base + "/auth/captcha"}, &c); err != nil {
			return crawl.Result{}, err
		}
		res.Next = append(res.Next, crawl.Input{Vars: map[string]any{
			"user": strings.TrimPrefix(key, "demo:session:"), "captcha_id": c.ID, "question": c.Question}})
	}
	return res, nil
})

// SessionKey is the key (and cookie pool id) of an account's session.
func SessionKey(user string) string { return "demo:session:" + user }

var loginSpec = crawl.TaskSpec{
	Name: LoginTask,
	Doc:  "log in with a solved captcha on a pooled device; store the session cookie (store: [pool:cookie])",
	Params: []crawl.Param{baseURLParam,
		{Name: "password", Type: crawl.String, Default: "trawler", Doc: "the accounts' password"}},
	Output: []crawl.Field{
		{Name: "value", Type: crawl.String, Doc: "Cookie header value of the session"},
		{Name: "account", Type: crawl.String, Doc: "user name"},
		{Name: "device_id", Type: crawl.String, Doc: "device the session is bound to"},
		{Name: "user_agent", Type: crawl.String, Doc: "user agent the session was made with"},
		{Name: "expires", Type: crawl.Time, Doc: "when the site ends the session"},
	},
	Needs:   []string{"device_id", "user_agent"},
	Timeout: 20 * time.Second,
	Retries: 2,
}

// Login logs an account in with its solved captcha, on a device from the pool, and
// stores the session (into pool:cookie) bound to that device and user agent.
var Login = crawl.TaskFunc(loginSpec, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	spec := loginSpec
	base, err := baseURL(env, spec)
	if err != nil {
		return crawl.Result{}, err
	}
	user := in.Var("user")
	if user == "" || in.Var("answer") == "" {
		return crawl.Result{}, crawl.Permanentf("%s: input %s needs variables user, captcha_id and answer (from external.captcha_solve)", LoginTask, in.Describe())
	}
	form := url.Values{"user": {user}, "password": {fmt.Sprint(param(env, spec, "password"))},
		"captcha_id": {in.Var("captcha_id")}, "answer": {in.Var("answer")}}
	req := &crawl.Request{Method: http.MethodPost, URL: base + "/auth/login", Body: []byte(form.Encode()),
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
	var s struct {
		Session   string `json:"session"`
		DeviceID  string `json:"device_id"`
		UserAgent string `json:"user_agent"`
		Expires   string `json:"expires"`
	}
	if err := fetchJSON(ctx, env, req, &s); err != nil {
		return crawl.Result{}, err
	}
	return crawl.Result{Items: []crawl.Item{{Key: SessionKey(user), URL: req.URL, Data: map[string]any{
		"value": s.Session, "account": user, "device_id": s.DeviceID, "user_agent": s.UserAgent, "expires": s.Expires}}}}, nil
})

var signedFeedSpec = crawl.TaskSpec{
	Name: SignedFeedTask,
	Doc:  "page through the signed story API (needs sign); store each listing, hand stories on to demo.member_story",
	Params: []crawl.Param{baseURLParam,
		{Name: "pages", Type: crawl.Int, Default: 2, Doc: "API pages to read (10 stories each)"}},
	Output: []crawl.Field{
		{Name: "id", Type: crawl.Int, Doc: "story id"},
		{Name: "title", Type: crawl.String, Doc: "story title"},
	},
	Needs:   []string{"sign"},
	Timeout: 20 * time.Second,
	Retries: 2,
}

// SignedFeed pages through the demo's signed API and hands every story on to
// demo.member_story.
var SignedFeed = crawl.TaskFunc(signedFeedSpec, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	spec := signedFeedSpec
	base, err := baseURL(env, spec)
	if err != nil {
		return crawl.Result{}, err
	}
	pages, err := intParam(env, spec, "pages")
	if err != nil {
		return crawl.Result{}, err
	}
	page, ok := varInt(in, "page")
	if !ok {
		page = 1
	}
	u := fmt.Sprintf("%s/api/signed/stories?page=%d", base, page)
	var out struct {
		NextPage int `json:"next_page"`
		Stories  []struct {
			ID    int    `json:"id"`
			Title string `json:"title"`
		} `json:"stories"`
	}
	if err := fetchJSON(ctx, env, &crawl.Request{Method: http.MethodGet, URL: u}, &out); err != nil {
		return crawl.Result{}, err
	}
	var res crawl.Result
	for _, st := range out.Stories {
		key := fmt.Sprintf("demo:signed:%d", st.ID)
		res.Items = append(res.Items, crawl.Item{Key: key, URL: u, Data: map[string]any{"id": st.ID, "title": st.Title}})
		res.Next = append(res.Next, crawl.Input{URL: fmt.Sprintf("%s/members/story/%d", base, st.ID), Task: MemberStoryTask, Parent: key})
	}
	if out.NextPage > 0 && page < pages {
		res.Next = append(res.Next, crawl.Input{Vars: map[string]any{"page": out.NextPage}, Task: SignedFeedTask})
	}
	return res, nil
})

var memberStorySpec = crawl.TaskSpec{
	Name:   MemberStoryTask,
	Doc:    "fetch a story's members-only page (needs cookie, device_id, user_agent); store it",
	Params: []crawl.Param{baseURLParam},
	Output: []crawl.Field{
		{Name: "id", Type: crawl.Int, Doc: "story id"},
		{Name: "title", Type: crawl.String, Doc: "story title"},
		{Name: "author", Type: crawl.String, Doc: "submitter"},
		{Name: "score", Type: crawl.Int, Doc: "points"},
		{Name: "member_note", Type: crawl.String, Doc: "the member-only line, naming the account that saw it"},
	},
	Needs:   []string{"cookie", "device_id", "user_agent"},
	Timeout: 30 * time.Second,
	Retries: 3,
}

// MemberStory reads a story's members-only page with a pooled session.
var MemberStory = crawl.TaskFunc(memberStorySpec, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	spec := memberStorySpec
	u, id, err := inputURL(env, spec, in, memberPath, func(base string, id int) string { return fmt.Sprintf("%s/members/story/%d", base, id) })
	if err != nil {
		return crawl.Result{}, err
	}
	var data map[string]any
	if err := fetchJSON(ctx, env, &crawl.Request{Method: http.MethodGet, URL: u}, &data); err != nil {
		return crawl.Result{}, err
	}
	return crawl.Result{Items: []crawl.Item{{Key: fmt.Sprintf("demo:member:%d", id), URL: u, Data: data}}}, nil
})

var memberPath = regexp.MustCompile(`/members/story/(\d+)/?$`)

// fetchJSON performs req and decodes its JSON answer into out.
func fetchJSON(ctx context.Context, env *crawl.Env, req *crawl.Request, out any) error {
	resp, err := env.Fetch(ctx, req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return crawl.Permanentf("%s %s: not the JSON expected: %v", req.Method, req.URL, err)
	}
	return nil
}
