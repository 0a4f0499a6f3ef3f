package demosite

import (
	"crypto/rand"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LoginUser and LoginPassword open the account of the login form (/form/login).
const (
	LoginUser     = "alice"
	LoginPassword = "correct-horse-42"
)

// LoginSessionTTL is how long a session cookie of the login form lives.
const LoginSessionTTL = time.Hour

// A login the way most sites have one, for logins done in a browser:
//
//	/form/login          a form (#user, #password, button[type=submit]) with a hidden
//	                     CSRF token the POST must bring back; the right password is
//	                     answered 303 to /form/account with the session cookie `sid`, a
//	                     wrong one shows the form again with p.error
//	/form/account        the account page (h1#account), whose script keeps a token in
//	                     localStorage (api_token); 303 to the form without a session
//	/form/private/N      protected pages (h1.private): 403 without a session cookie
//	POST /form/expire    ends every session, as a site does when they time out
func (s *site) addLoginPages() {
	var mu sync.Mutex
	tokens := map[string]bool{}   // CSRF tokens handed out and not used yet
	sessions := map[string]bool{} // session ids logged in
	newID := func() string { return rand.Text() }
	session := func(r *http.Request) bool {
		c, err := r.Cookie("sid")
		mu.Lock()
		defer mu.Unlock()
		return err == nil && sessions[c.Value]
	}
	form := func(w http.ResponseWriter, msg string) {
		tok := newID()
		mu.Lock()
		tokens[tok] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `%s<form method="post" action="/form/login">
<input type="hidden" name="csrf" value="%s">
<input id="user" name="user"> <input id="password" name="password" type="password">
<button type="submit">Log in</button></form>%s
</body></html>
`, pageHead, tok, msg)
	}
	s.mux.HandleFunc("GET /form/login", func(w http.ResponseWriter, r *http.Request) { form(w, "") })
	s.mux.HandleFunc("POST /form/login", func(w http.ResponseWriter, r *http.Request) {
		tok := r.PostFormValue("csrf")
		mu.Lock()
		valid := tokens[tok]
		delete(tokens, tok)
		mu.Unlock()
		if !valid {
			http.Error(w, "missing or stale CSRF token", http.StatusForbidden)
			return
		}
		if r.PostFormValue("user") != LoginUser || r.PostFormValue("password") != LoginPassword {
			form(w, `<p class="error">Wrong user name or password</p>`)
			return
		}
		sid := newID()
		mu.Lock()
		sessions[sid] = true
		mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: sid, Path: "/", HttpOnly: true, Expires: time.Now().Add(LoginSessionTTL)})
		http.Redirect(w, r, "/form/account", http.StatusSeeOther)
	})
	s.mux.HandleFunc("GET /form/account", func(w http.ResponseWriter, r *http.Request) {
		if !session(r) {
			http.Redirect(w, r, "/form/login", http.StatusSeeOther)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `%s<h1 id="account">%s</h1>
<script>localStorage.setItem("api_token", "tok-" + %q);</script>
</body></html>
`, pageHead, html.EscapeString(LoginUser), LoginUser)
	})
	s.mux.HandleFunc("POST /form/expire", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		clear(sessions)
		mu.Unlock()
	})
	s.mux.HandleFunc("GET /form/private/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if !session(r) {
			http.Error(w, "log in first", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "%s<h1 class=\"private\">Private page %d</h1>\n</body></html>\n", pageHead, n)
	})
}
