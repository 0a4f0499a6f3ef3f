package console

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
)

// role is what a request's token allows.
type role int

const (
	denied role = iota
	readOnly
	full
)

// roleOf checks the bearer token of a request against the configured ones.
func (s *Server) roleOf(r *http.Request) (role, string) {
	if s.cfg.Token == "" {
		return full, ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return denied, "this console needs a bearer token: send the header \"Authorization: Bearer TOKEN\" (the token given to trawler console with --token or TRAWLER_TOKEN)"
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return denied, "the Authorization header must read \"Bearer TOKEN\""
	}
	if equal(tok, s.cfg.Token) {
		return full, ""
	}
	if s.cfg.ReadToken != "" && equal(tok, s.cfg.ReadToken) {
		return readOnly, ""
	}
	return denied, "wrong bearer token: it matches neither the console's token nor its read-only token"
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// readAllowed are the requests that change nothing besides plain reads: a search body
// and a chain to validate are posted, not stored.
func readAllowed(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	return r.Method == http.MethodPost && (r.URL.Path == "/api/search" || r.URL.Path == "/api/chains/validate")
}

// authorize lets a request through when its token allows it.
func (s *Server) authorize(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ro, why := s.roleOf(r)
		switch {
		case ro == denied:
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawler"`)
			writeError(w, http.StatusUnauthorized, why, "Authorization")
		case ro == readOnly && !readAllowed(r):
			writeError(w, http.StatusForbidden, "this token is read-only: it can search and read runs, items and history, but not start, cancel or schedule runs; use the full-access token", "Authorization")
		default:
			h(w, r)
		}
	})
}

// apiError is the body of every error the API answers.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	// Problems lists every problem of a chain file, each with its line.
	Problems []problem `json:"problems,omitempty"`
}

type problem struct {
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, msg, field string) {
	writeJSON(w, status, apiError{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
