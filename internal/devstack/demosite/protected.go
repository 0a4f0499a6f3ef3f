package demosite

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/internal/external"
)

// The members' side of the demo site, for resource farming. Logging in needs a solved
// captcha and a registered device; members' pages need the session cookie, the device
// it was made on, and a moderate pace; the signed API needs an HMAC of its query:
//
//	GET  /auth/captcha                  {id, question}: a small sum, "What is 7 plus 12?"
//	POST /device/register               {device_id}
//	POST /auth/login                    form user, password, captcha_id, answer; header
//	                                    X-Device-Id: sets cookie demo_session and answers
//	                                    {session, user, device_id, user_agent, expires}
//	GET  /members/story/ID              the story with a member's note (cookie + device)
//	GET  /api/signed/stories?page=N&ts=T&sig=S
//	                                    10 stories a page, {stories, next_page}; S is
//	                                    external.QuerySignature(APISecret, path, query)
//	POST /auth/expire?user=U            ends U's sessions at once (a site logging out)
//	GET  /auth/stats                    counters: logins, denials by reason, pages served
//
// Refusals answer 403 with X-Denied naming the reason — captcha, device, cookie,
// signature or overuse (a session used more than SessionRate times in a second, with
// Retry-After) — so a ban rule can tell a bad cookie from a bad signature.

// Members' side settings.
const (
	Password    = "trawler" // every account's password; accounts are reader1 … reader99
	APISecret   = "demo-api-secret"
	SessionTTL  = time.Hour
	SessionRate = 5 // requests per second one session may make
	SignedPage  = 10
	signedSkew  = 5 * time.Minute
)

type session struct {
	user, device, agent string
	expires             time.Time
	recent              []time.Time // request times within the last second
}

type members struct {
	site     *site
	mu       sync.Mutex
	captchas map[string]int
	devices  map[string]bool
	sessions map[string]*session
	n        int // ids handed out
	stats    map[string]int
}

func (s *site) addProtected() {
	m := &members{site: s, captchas: map[string]int{}, devices: map[string]bool{}, sessions: map[string]*session{}, stats: map[string]int{}}
	s.mux.HandleFunc("GET /auth/captcha", m.captcha)
	s.mux.HandleFunc("POST /device/register", m.register)
	s.mux.HandleFunc("POST /auth/login", m.login)
	s.mux.HandleFunc("POST /auth/expire", m.expire)
	s.mux.HandleFunc("GET /auth/stats", m.statsPage)
	s.mux.HandleFunc("GET /members/story/{id}", m.story)
	s.mux.HandleFunc("GET /api/signed/stories", m.signed)
}

// Captcha returns the question and answer of captcha n: deterministic, so the bundled
// arith solver and tests agree with the site.
func Captcha(n int) (question string, answer int) {
	a, b := 2+(n*7)%17, 3+(n*11)%13
	switch n % 3 {
	case 0:
		return fmt.Sprintf("What is %d plus %d?", a, b), a + b
	case 1:
		return fmt.Sprintf("What is %d minus %d?", a, b), a - b
	}
	return fmt.Sprintf("What is %d times %d?", a, b), a * b
}

func (m *members) next() int { m.n++; return m.n }

func (m *members) captcha(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	n := m.next()
	q, a := Captcha(n)
	id := "c" + strconv.Itoa(n)
	m.captchas[id] = a
	m.stats["captchas"]++
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "question": q})
}

func (m *members) register(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	id := fmt.Sprintf("dev-%d-%s", m.next(), token(4))
	m.devices[id] = true
	m.stats["devices"]++
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"device_id": id})
}

func (m *members) login(w http.ResponseWriter, r *http.Request) {
	user, answer, id := r.FormValue("user"), r.FormValue("answer"), r.FormValue("captcha_id")
	device := r.Header.Get(external.DeviceHeader)
	m.mu.Lock()
	defer m.mu.Unlock()
	want, ok := m.captchas[id]
	delete(m.captchas, id) // one try per captcha
	switch {
	case !ok || answer != strconv.Itoa(want):
		m.deny(w, "captcha", "wrong or unknown captcha answer; fetch a new one from /auth/captcha")
		return
	case !m.devices[device]:
		m.deny(w, "device", "unknown device; register one at /device/register and send it in "+external.DeviceHeader)
		return
	case !validUser(user) || r.FormValue("password") != Password:
		m.stats["denied_password"]++
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "wrong user or password"})
		return
	}
	tok := token(16)
	s := &session{user: user, device: device, agent: r.UserAgent(), expires: time.Now().Add(SessionTTL)}
	m.sessions[tok] = s
	m.stats["logins"]++
	http.SetCookie(w, &http.Cookie{Name: "demo_session", Value: tok, Path: "/", Expires: s.expires, HttpOnly: true})
	writeJSON(w, http.StatusOK, map[string]any{"session": "demo_session=" + tok, "user": user, "device_id": device,
		"user_agent": s.agent, "expires": s.expires.UTC().Format(time.RFC3339)})
}

func validUser(u string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(u, "reader"))
	return strings.HasPrefix(u, "reader") && err == nil && n >= 1 && n <= 99
}

func (m *members) expire(w http.ResponseWriter, r *http.Request) {
	user := r.FormValue("user")
	m.mu.Lock()
	n := 0
	for _, s := range m.sessions {
		if s.user == user && time.Now().Before(s.expires) {
			s.expires = time.Now()
			n++
		}
	}
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]int{"expired": n})
}

func (m *members) statsPage(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	out := make(map[string]int, len(m.stats))
	for k, v := range m.stats {
		out[k] = v
	}
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (m *members) story(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	c, err := r.Cookie("demo_session")
	var s *session
	if err == nil {
		s = m.sessions[c.Value]
	}
	now := time.Now()
	switch {
	case s == nil || !now.Before(s.expires):
		m.deny(w, "cookie", "log in first: no session or an expired one")
		m.mu.Unlock()
		return
	case r.Header.Get(external.DeviceHeader) != s.device:
		m.deny(w, "device", "this session belongs to another device")
		m.mu.Unlock()
		return
	}
	kept := s.recent[:0]
	for _, t := range s.recent {
		if now.Sub(t) < time.Second {
			kept = append(kept, t)
		}
	}
	s.recent = kept
	if len(s.recent) >= SessionRate {
		w.Header().Set("Retry-After", "1")
		m.deny(w, "overuse", fmt.Sprintf("more than %d requests a second with one session", SessionRate))
		m.mu.Unlock()
		return
	}
	s.recent = append(s.recent, now)
	m.stats["members_served"]++
	user := s.user
	m.mu.Unlock()
	st, ok := m.site.storyParam(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": st.ID, "title": st.Title, "author": st.Author, "score": st.Score,
		"member_note": "seen by " + user})
}

func (m *members) signed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ts, err := strconv.ParseInt(q.Get("ts"), 10, 64)
	m.mu.Lock()
	switch {
	case q.Get("sig") != external.QuerySignature([]byte(APISecret), r.URL.Path, q):
		m.deny(w, "signature", "bad signature: sig must be the HMAC-SHA256 of the path and sorted query with ts")
		m.mu.Unlock()
		return
	case err != nil || time.Since(time.Unix(ts, 0)).Abs() > signedSkew:
		m.deny(w, "signature", "stale or missing ts: sign with the current Unix time")
		m.mu.Unlock()
		return
	}
	m.stats["signed_served"]++
	m.mu.Unlock()
	o := m.site.o
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	pages := (o.Stories() + SignedPage - 1) / SignedPage
	var stories []map[string]any
	for id := (page-1)*SignedPage + 1; id <= min(page*SignedPage, o.Stories()); id++ {
		if st, ok := o.Story(id); ok {
			stories = append(stories, map[string]any{"id": st.ID, "title": st.Title})
		}
	}
	next := 0
	if page < pages {
		next = page + 1
	}
	writeJSON(w, http.StatusOK, map[string]any{"page": page, "next_page": next, "stories": stories})
}

// deny answers 403 with the reason in X-Denied; the caller holds m.mu.
func (m *members) deny(w http.ResponseWriter, reason, msg string) {
	m.stats["denied_"+reason]++
	w.Header().Set("X-Denied", reason)
	writeJSON(w, http.StatusForbidden, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func token(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
