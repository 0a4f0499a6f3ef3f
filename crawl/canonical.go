package crawl

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DefaultTrackingParams are the query parameters CanonicalURL drops unless
// CanonOptions.KeepTracking is set: analytics and ad-click ids that name the visit, not
// the page. A trailing * matches any ending (utm_source, utm_medium, …).
var DefaultTrackingParams = []string{
	"utm_*", "gclid", "fbclid", "msclkid", "dclid", "yclid", "mc_cid", "mc_eid", "_ga", "igshid",
}

// CanonOptions tunes CanonicalURL. The zero value is the usual choice.
type CanonOptions struct {
	// KeepQueryOrder keeps the query parameters in the order the URL gives them, for a
	// site whose server reads them by position.
	KeepQueryOrder bool
	// KeepTracking keeps DefaultTrackingParams; DropParams still apply.
	KeepTracking bool
	// DropParams are more query parameters to drop, by name or by a pattern where *
	// matches any run of characters ("sessionid", "*sessid*", "ref_*"); names match in
	// any case.
	DropParams []string
}

// CanonicalURL is the one form of an absolute http(s) URL that every spelling of the
// same address shares, so that a seen-set or a key built from it counts a page once.
// Each rule changes only how the URL is written, never what a server is asked for:
//
//   - The scheme and host are lower-cased: both are case-insensitive (RFC 3986 §6.2.2.1).
//   - A host with non-ASCII letters becomes its ASCII (punycode) form, as the fetcher
//     sends it: http://BÜCHER.example/ is http://xn--bcher-kva.example/. An ASCII host is
//     only lower-cased, so names with an underscore still work.
//   - The default port goes (:80 for http, :443 for https), and so does an empty port
//     or leading zeros (:080 is :80): the same connection is made.
//   - User info (user:password@) goes: it is a credential, not part of the address, and
//     no key should hold a password (see StripUserinfo).
//   - The fragment (#…) goes: it never reaches the server.
//   - Percent-encoding is normalised (RFC 3986 §6.2.2.2): an encoded unreserved
//     character (A–Z a–z 0–9 - . _ ~) is decoded (%7e is ~, %41 is A); every other
//     escape keeps its encoding, with upper-case hex (%2f is %2F), because decoding a
//     reserved character changes the meaning (a/b is not a%2Fb, a=b&c is not a=b%26c);
//     a character that may not appear bare (a space, a quote, <, >, \, ^, `, {, |, },
//     a control or any non-ASCII byte) is encoded, UTF-8 for non-ASCII text, as the
//     fetcher sends it. A % not followed by two hex digits is an error in the path,
//     where the fetcher cannot request such a URL either, and is kept as it is in the
//     query, which the fetcher sends as written (decoding or encoding it would be a
//     guess at what the server makes of it).
//   - Dot segments are resolved (RFC 3986 §5.2.4, after decoding, so %2E counts as a
//     dot): /a/./b/../c is /a/c, and a .. above the root stays at the root (/../a is
//     /a), as a browser does.
//   - An empty path is "/": a client asks for "/" either way.
//   - Query parameters are sorted by name, keeping repeated names in their given order
//     (a=2&b=1&a=1 is a=2&a=1&b=1), unless KeepQueryOrder is set: almost every server
//     reads the query as a map. Empty parameters (a=1&&b=2) and an empty query (a
//     bare ?) go.
//   - Tracking parameters (DefaultTrackingParams unless KeepTracking, and DropParams)
//     go: they record how the visitor came, and the page is the same without them.
//     Names are compared after normalisation and in any case (PHPSESSID matches
//     *sessid*).
//
// What is kept as it is: the path's case (paths are case-sensitive: /Item and /item
// are different pages), a trailing slash (/a/ and /a may differ), repeated slashes, a
// trailing dot on the host (an absolute name) and parameters in the path (;jsessionid=…).
//
// Anything other than an absolute http:// or https:// URL with a host is an error that
// names the URL (its credentials masked) and what is accepted.
func CanonicalURL(raw string, opts CanonOptions) (string, error) {
	s := strings.TrimSpace(raw)
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("canonical URL of %q: %s", RedactURL(strings.TrimSpace(raw)), fmt.Sprintf(format, args...))
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	scheme, rest, ok := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return fail("not an absolute http(s) URL; only http://host/… and https://host/… are accepted")
	}
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	host, err := canonicalHost(scheme, authority)
	if err != nil {
		return fail("%v", err)
	}
	path, query, hasQuery := strings.Cut(pathQuery, "?")
	path, err = normalizeEscapes(path, false)
	if err != nil {
		return fail("path: %v", err)
	}
	path = removeDotSegments(path)
	if path == "" {
		path = "/"
	}
	if hasQuery {
		if q := canonicalQuery(query, opts); q != "" {
			return scheme + "://" + host + path + "?" + q, nil
		}
	}
	return scheme + "://" + host + path, nil
}

// canonicalHost is host[:port] lower-cased, in ASCII, without the scheme's default port.
func canonicalHost(scheme, authority string) (string, error) {
	host, port := authority, ""
	if strings.HasPrefix(authority, "[") { // an IPv6 literal: [::1]:8080
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", fmt.Errorf("IPv6 host %q lacks its closing ]", authority)
		}
		host, port = authority[:end+1], authority[end+1:]
		if port != "" && port[0] != ':' {
			return "", fmt.Errorf("%q after the IPv6 host %s; want :port", port, host)
		}
		host = strings.ToLower(host)
	} else {
		if i := strings.LastIndexByte(authority, ':'); i >= 0 {
			host, port = authority[:i], authority[i:]
		}
		if strings.Contains(host, "%") {
			h, err := decodeAll(host)
			if err != nil {
				return "", fmt.Errorf("host: %v", err)
			}
			host = h
		}
		if host == "" {
			return "", fmt.Errorf("no host; want http(s)://host/…")
		}
		if i := strings.IndexFunc(host, func(r rune) bool { return r <= ' ' || strings.ContainsRune(`/?#@[]%:\`, r) }); i >= 0 {
			return "", fmt.Errorf("host %q has %q, which a host name cannot hold", host, host[i:i+1])
		}
		if isASCII(host) {
			host = strings.ToLower(host)
		} else {
			a, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", fmt.Errorf("host %q is not a valid international domain name: %v", host, err)
			}
			host = a
		}
	}
	if port = strings.TrimPrefix(port, ":"); port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || strings.Trim(port, "0123456789") != "" {
			return "", fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			return host, nil
		}
		return host + ":" + strconv.FormatUint(n, 10), nil
	}
	return host, nil
}

// canonicalQuery is the query with its escapes normalised, empty and dropped
// parameters taken out and, unless opts.KeepQueryOrder, sorted by name.
func canonicalQuery(q string, opts CanonOptions) string {
	var params []string
	for _, p := range strings.Split(q, "&") {
		if p == "" {
			continue
		}
		p, _ := normalizeEscapes(p, true) // a query has no bad escapes: they are kept
		name, _, _ := strings.Cut(p, "=")
		if lname := strings.ToLower(name); (!opts.KeepTracking && matchesAny(lname, DefaultTrackingParams)) || matchesAny(lname, opts.DropParams) {
			continue
		}
		params = append(params, p)
	}
	if !opts.KeepQueryOrder {
		slices.SortStableFunc(params, func(a, b string) int { return strings.Compare(paramName(a), paramName(b)) })
	}
	return strings.Join(params, "&")
}

func paramName(p string) string { name, _, _ := strings.Cut(p, "="); return name }

// matchesAny reports whether name matches one of the patterns, compared in lower
// case; * in a pattern matches any run of characters.
func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if globMatch(strings.ToLower(strings.TrimSpace(p)), name) {
			return true
		}
	}
	return false
}

func globMatch(pattern, s string) bool {
	first, rest, ok := strings.Cut(pattern, "*")
	if !ok {
		return pattern == s
	}
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	// Each part between stars matches at its leftmost place, which leaves the most of s
	// for the parts after it; the last part must end s.
	for {
		part, after, more := strings.Cut(rest, "*")
		if !more {
			return strings.HasSuffix(s, part)
		}
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s, rest = s[i+len(part):], after
	}
}

// normalizeEscapes decodes escaped unreserved characters, upper-cases the hex of the
// other escapes and encodes the bytes that may not appear bare in a path (or, when
// query is set, a query). Reserved characters stay as they are, bare or encoded. A %
// without two hex digits is an error in a path and kept in a query.
func normalizeEscapes(s string, query bool) (string, error) {
	if isNormal(s, query) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])):
			if !query {
				end := min(i+3, len(s))
				return "", fmt.Errorf("%q is not a percent-escape (want %% and two hex digits; a literal %% is written %%25)", s[i:end])
			}
			b.WriteByte(c) // the fetcher sends a query as it is written
		case c == '%':
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteString(strings.ToUpper(s[i+1 : i+3]))
			}
			i += 2
		case isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@/", c) >= 0 || (query && c == '?') || c == '[' || c == ']':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String(), nil
}

// isNormal reports whether normalizeEscapes would leave s as it is: no escape, and no
// byte it would encode (the usual URL, taken without copying it).
func isNormal(s string, query bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isUnreserved(c) && strings.IndexByte("!$&'()*+,;=:@/[]", c) < 0 && !(query && c == '?') {
			return false
		}
	}
	return true
}

// escapeBare encodes the bytes that never appear bare in a URL (a space, a quote, <, >,
// \, ^, `, {, |, }, a control, any non-ASCII byte), leaving everything else, delimiters
// and escapes included, as it is.
func escapeBare(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"<>\\^`{|}", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decodeAll decodes every percent-escape of s (a host name), which must be UTF-8.
func decodeAll(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", fmt.Errorf("%q is not a percent-escape", s[i:min(i+3, len(s))])
		}
		b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		i += 2
	}
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("%q does not decode to UTF-8 text", s)
	}
	return b.String(), nil
}

// removeDotSegments resolves . and .. in an absolute path (RFC 3986 §5.2.4); a ..
// above the root stays at the root.
func removeDotSegments(path string) string {
	if !strings.Contains(path, ".") {
		return path
	}
	segs := strings.Split(path, "/") // path starts with /, so segs[0] == ""
	out := []string{""}
	for i, seg := range segs[1:] {
		last := i == len(segs)-2
		switch seg {
		case ".":
			if last {
				out = append(out, "") // /a/. is /a/
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "") // /a/b/.. is /a/
			}
		default:
			out = append(out, seg)
		}
	}
	if len(out) == 1 {
		return "/"
	}
	return strings.Join(out, "/")
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// CanonicalLink is the page's <link rel="canonical" href="…"> in its <head>, resolved
// against the page (and its <base>) and made canonical with opts, for a step that
// honours what a site says is the page's own address. The first such link with a
// usable href wins; a link without an href, or with an empty or non-http(s) one, is
// skipped. rel may hold several tokens in any case ("canonical alternate"). A link in
// the <body> is ignored, as search engines ignore it: it may come from user content.
// It reports false when the page names no usable canonical link.
func CanonicalLink(p *Page, opts CanonOptions) (string, bool) {
	if p == nil || p.Doc == nil {
		return "", false
	}
	base := p.Doc.Url // the page's <base>, when it has one
	if base == nil {
		u, err := url.Parse(p.URL)
		if err != nil {
			return "", false
		}
		base = u
	}
	for _, n := range p.Doc.Find("head link[rel][href]").Nodes {
		rel, href := "", ""
		for _, a := range n.Attr {
			switch strings.ToLower(a.Key) {
			case "rel":
				rel = a.Val
			case "href":
				href = a.Val
			}
		}
		if !hasToken(rel, "canonical") {
			continue
		}
		if c, ok := canonicalRef(base, href, opts); ok {
			return c, true
		}
	}
	return "", false
}

// canonicalRef is href resolved against base and made canonical, if it is a usable
// http(s) link. Bare bytes are escaped first so that resolving keeps the href's own
// escapes (a%2Fb stays a%2Fb next to a space).
func canonicalRef(base *url.URL, href string, opts CanonOptions) (string, bool) {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return "", false
	}
	u, err := base.Parse(escapeBare(href))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	c, err := CanonicalURL(u.String(), opts)
	return c, err == nil
}

// hasToken reports whether the space-separated list holds tok, in any case.
func hasToken(list, tok string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, tok) {
			return true
		}
	}
	return false
}
