package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/internal/credentials"
)

// The principals of the console's own tokens: --token speaks as an admin, --read-token
// as a fleet-wide viewer; with no token configured (loopback only) every request is the
// open console's admin.
var (
	tokenAdmin  = &Principal{ID: "console-token", Name: "--token", Role: RoleAdmin}
	readViewer  = &Principal{ID: "console-read-token", Name: "--read-token", Role: RoleViewer}
	openConsole = &Principal{ID: "open-console", Name: "no token (loopback)", Role: RoleAdmin}
)

// authError is why a request's token was refused.
type authError struct {
	status int
	msg    string
	reason string // the auth failures metric's label; "" counts no failure
}

// principalOf checks the bearer token of a request against the console's tokens and the
// principals in Redis (read on every request, so a revoked token is refused at once).
// The scheme is case-insensitive (RFC 9110: "bearer" and "BEARER" are "Bearer").
func (s *Server) principalOf(r *http.Request) (*Principal, *authError) {
	if s.cfg.Token == "" {
		return openConsole, nil
	}
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		return nil, &authError{http.StatusUnauthorized, "this console needs a bearer token: send the header \"Authorization: Bearer TOKEN\" (the token given to trawler console with --token, --token-file or TRAWLER_TOKEN, or one made by `trawler token create`)", ""}
	}
	scheme, tok, _ := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return nil, &authError{http.StatusUnauthorized, "malformed Authorization header: it must read \"Bearer TOKEN\" (one space, then the token; Basic and other schemes are not accepted)", "malformed"}
	}
	// Both tokens are always compared, each in time independent of where it differs
	// and of its length, so the timing says neither which token a guess is close to nor
	// how long the tokens are.
	isFull := equal(tok, s.cfg.Token)
	isRead := equal(tok, s.cfg.ReadToken) && s.cfg.ReadToken != ""
	switch {
	case isFull:
		return tokenAdmin, nil
	case isRead:
		return readViewer, nil
	}
	if s.principals != nil {
		p, err := s.principals.Lookup(r.Context(), tok)
		if err != nil {
			s.cfg.Log.Error("console: check a token against Redis", "err", err)
			return nil, &authError{http.StatusServiceUnavailable, "cannot check the token: the console's Redis (--redis) does not answer; try again when it is back", ""}
		}
		if p != nil {
			return p, nil
		}
	}
	return nil, &authError{http.StatusUnauthorized, "wrong bearer token: it matches neither the console's tokens nor a principal's (a revoked or rotated token is refused; `trawler token list` shows the principals)", "wrong_token"}
}

// equal compares the SHA-256 digests of a and b: equal lengths, so
// subtle.ConstantTimeCompare does not return early on a length mismatch.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// readPOSTs are the POST routes a read-only token may call: a search body and a chain
// to validate are posted, not stored.
var readPOSTs = map[string]bool{"POST /api/search": true, "POST /api/chains/validate": true}

// readAllowed reports whether a read-only token may call the route of pattern with
// method: reads, and the POSTs of readPOSTs.
func readAllowed(pattern, method string) bool {
	return method == http.MethodGet || method == http.MethodHead || readPOSTs[pattern]
}

// fleetRoutes show the whole fleet at once — every tenant's workers, budgets, dedup
// namespaces, recrawl plans and metric series — so a token scoped to tenants cannot
// read them.
var fleetRoutes = map[string]string{
	"GET /api/fleet":    "the fleet's workers and every tenant's load",
	"GET /api/capacity": "the fleet's capacity for every tenant's runs",
	"GET /api/hosts":    "the host budgets every tenant shares",
	"GET /api/dedup":    "every tenant's dedup namespaces",
	"GET /api/recrawl":  "every tenant's recrawl plans",
	"GET /metrics":      "every tenant's metric series",
}

// adminRoutes are for admins alone.
var adminRoutes = map[string]string{"GET /api/audit": "the audit trail"}

type principalKey struct{}

// principalFrom is the principal authorize found for a request.
func principalFrom(r *http.Request) *Principal {
	if p, ok := r.Context().Value(principalKey{}).(*Principal); ok {
		return p
	}
	return openConsole
}

// permit says whether p may call the route of pattern with method at all, and why not;
// a route that reads or changes one tenant's data checks the tenant itself.
func permit(p *Principal, pattern, method string) string {
	switch {
	case adminRoutes[pattern] != "" && p.Role != RoleAdmin:
		return fmt.Sprintf("%s shows %s, which only an admin token may read; this token is a%s %s", pattern, adminRoutes[pattern], article(p.Role), p.Role)
	case fleetRoutes[pattern] != "" && p.Scoped():
		return fmt.Sprintf("%s shows %s; this token is a%s %s of tenants %s and cannot read it: use a viewer or admin token", pattern, fleetRoutes[pattern], article(p.Role), p.Role, strings.Join(p.Tenants, ", "))
	case readAllowed(pattern, method):
		return ""
	case p.Role == RoleViewer:
		return "this token is read-only: it can search and read runs, items and history, but not start, cancel or schedule runs; use the full-access token or an operator's"
	case p.Role == RoleAnalyst:
		return fmt.Sprintf("this token is an analyst's (tenants %s): it reads runs, records, search and history, but cannot start, cancel or schedule runs; ask for an operator token", strings.Join(p.Tenants, ", "))
	}
	return ""
}

func article(r Role) string {
	if r == RoleAdmin || r == RoleOperator || r == RoleAnalyst {
		return "n"
	}
	return ""
}

// authorize lets a request to the route of pattern through when its token allows it,
// and tells the handler the principal.
func (s *Server) authorize(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := sourceAddr(r)
		if wait := s.throttle.wait(addr, time.Now()); wait > 0 && r.Header.Get("Authorization") != "" {
			AuthFailures.WithLabelValues("throttled").Inc()
			secs := int(wait.Round(time.Second) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many bad tokens from this address: wait %d s (Retry-After) before sending a token again", max(secs, 1)), "Authorization")
			return
		}
		p, aerr := s.principalOf(r)
		if aerr != nil && aerr.reason != "" {
			AuthFailures.WithLabelValues(aerr.reason).Inc()
			s.throttle.fail(addr, time.Now())
		}
		if aerr != nil {
			if aerr.status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="trawler"`)
			}
			writeError(w, aerr.status, aerr.msg, "Authorization")
			return
		}
		s.auditCall(pattern, p, w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if why := permit(p, pattern, r.Method); why != "" {
				writeError(w, http.StatusForbidden, why, "Authorization")
				return
			}
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		}))
	})
}

// DefaultMaxBody is the largest request body the API reads unless Config.MaxBody says
// otherwise: a chain file or a search body is a few KiB.
const DefaultMaxBody = 1 << 20

// limitBody caps a request's body at the configured size: a body that says it is larger
// is refused at once, one that turns out larger fails its read (bodyTooLarge).
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength > s.cfg.MaxBody {
		bodyTooLarge(w, s.cfg.MaxBody)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	return true
}

// tooLarge reports whether err is the read of a body past the limit; if so it answers
// 413.
func tooLarge(w http.ResponseWriter, err error) bool {
	var mb *http.MaxBytesError
	if !errors.As(err, &mb) {
		return false
	}
	bodyTooLarge(w, mb.Limit)
	return true
}

func bodyTooLarge(w http.ResponseWriter, limit int64) {
	writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than this console's limit of %s: send a smaller body (a chain file or search body is a few KiB), or start the console with a larger --max-body", byteSize(limit)), "body")
}

// byteSize writes n bytes as people read it: 1 MiB, 64 KiB, 300 bytes.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB (%d bytes)", n>>20, n)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB (%d bytes)", n>>10, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Token resolves a token given either as a value or as a file holding it (one line;
// the trailing newline is dropped). valueName and fileName are the flags or variables
// it came from, for errors: "--token" and "--token-file", or "TRAWLER_TOKEN" and
// "TRAWLER_TOKEN_FILE". A file keeps the token out of the process list and the shell
// history.
func Token(value, file, valueName, fileName string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s both give the token: keep one", valueName, fileName)
	}
	tok, err := credentials.Secret(fileName, file)
	if err != nil {
		return "", err
	}
	tok = strings.TrimRight(tok, "\r\n")
	switch {
	case strings.TrimSpace(tok) == "":
		return "", fmt.Errorf("%s %s is empty: write the token into it, on one line", fileName, file)
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("%s %s holds more than one line: write only the token into it, on one line", fileName, file)
	case strings.TrimSpace(tok) != tok:
		return "", fmt.Errorf("%s %s: the token starts or ends with spaces, which a bearer header cannot carry; write only the token", fileName, file)
	}
	return tok, nil
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
