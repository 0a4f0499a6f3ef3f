package crawl_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

func TestCanonicalURL(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		// Scheme and host case; the path's case is kept.
		{"case", "HTTP://Example.COM/Item/A", "http://example.com/Item/A"},
		{"mixed scheme", "hTTpS://WWW.example.com", "https://www.example.com/"},
		{"spaces around", "  http://example.com/a \n", "http://example.com/a"},
		// International host names.
		{"IDN upper", "http://BÜCHER.example/", "http://xn--bcher-kva.example/"},
		{"IDN lower", "http://bücher.example/Straße", "http://xn--bcher-kva.example/Stra%C3%9Fe"},
		{"IDN already punycode", "http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"},
		{"IDN full-width dots", "http://ｅｘａｍｐｌｅ．com/", "http://example.com/"},
		{"IDN japanese", "https://例え.テスト/", "https://xn--r8jz45g.xn--zckzah/"},
		{"IDN escaped in host", "http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/"},
		{"underscore host", "http://My_Host.example/", "http://my_host.example/"},
		// Ports.
		{"http 80", "http://example.com:80/a", "http://example.com/a"},
		{"https 443", "https://example.com:443/a", "https://example.com/a"},
		{"http 443 kept", "http://example.com:443/a", "http://example.com:443/a"},
		{"https 80 kept", "https://example.com:80/a", "https://example.com:80/a"},
		{"other port", "http://example.com:8080", "http://example.com:8080/"},
		{"empty port", "http://example.com:/a", "http://example.com/a"},
		{"leading zeros", "http://example.com:0080/a", "http://example.com/a"},
		{"IPv6", "http://[2001:DB8::1]/a", "http://[2001:db8::1]/a"},
		{"IPv6 port", "http://[2001:DB8::1]:8080/a", "http://[2001:db8::1]:8080/a"},
		{"IPv6 default port", "https://[::1]:443", "https://[::1]/"},
		{"IPv4 port", "http://127.0.0.1:80/", "http://127.0.0.1/"},
		// User info and fragments.
		{"userinfo", "http://bob:s3cret@example.com/a", "http://example.com/a"},
		{"userinfo with @", "http://bob:p@ss@example.com:80/a", "http://example.com/a"},
		{"fragment", "http://example.com/a#top", "http://example.com/a"},
		{"fragment after query", "http://example.com/a?b=1#c?d=2", "http://example.com/a?b=1"},
		{"fragment only", "http://example.com#x", "http://example.com/"},
		// Dot segments.
		{"dot", "http://example.com/a/./b", "http://example.com/a/b"},
		{"dotdot", "http://example.com/a/b/../c", "http://example.com/a/c"},
		{"dotdot last", "http://example.com/a/b/..", "http://example.com/a/"},
		{"dot last", "http://example.com/a/.", "http://example.com/a/"},
		{"above root", "http://example.com/../../a", "http://example.com/a"},
		{"only above root", "http://example.com/..", "http://example.com/"},
		{"escaped dots", "http://example.com/a/%2E%2e/b", "http://example.com/b"},
		{"dots in names", "http://example.com/a..b/.c/d.", "http://example.com/a..b/.c/d."},
		{"double slash kept", "http://example.com//a//b", "http://example.com//a//b"},
		{"trailing slash kept", "http://example.com/a/", "http://example.com/a/"},
		// Percent-encoding.
		{"unreserved decoded", "http://example.com/%7euser/%41%62c%2D%5F%2E", "http://example.com/~user/Abc-_."},
		{"reserved kept upper", "http://example.com/a%2fb%3f%23?q=a%26b%3dc", "http://example.com/a%2Fb%3F%23?q=a%26b%3Dc"},
		{"slash stays encoded", "http://example.com/a%2Fb", "http://example.com/a%2Fb"},
		{"space", "http://example.com/a b?q=x y", "http://example.com/a%20b?q=x%20y"},
		{"plus kept", "http://example.com/a+b?q=x+y", "http://example.com/a+b?q=x+y"},
		{"unicode path", "http://example.com/café/日本", "http://example.com/caf%C3%A9/%E6%97%A5%E6%9C%AC"},
		{"unicode escaped lower", "http://example.com/caf%c3%a9", "http://example.com/caf%C3%A9"},
		{"unsafe bytes", "http://example.com/a\"<>\\^`{|}", "http://example.com/a%22%3C%3E%5C%5E%60%7B%7C%7D"},
		{"brackets and sub-delims kept", "http://example.com/a[1]/!$&'()*,;=:@", "http://example.com/a[1]/!$&'()*,;=:@"},
		{"percent escaped", "http://example.com/100%25", "http://example.com/100%25"},
		{"stray percent in query kept", "http://example.com/?q=5%2&r=%zz&s=100%&t=%7e", "http://example.com/?q=5%2&r=%zz&s=100%&t=~"},
		// The query.
		{"empty path with query", "http://example.com?b=2&a=1", "http://example.com/?a=1&b=2"},
		{"sorted", "http://example.com/s?z=1&a=2&m=3", "http://example.com/s?a=2&m=3&z=1"},
		{"repeated keys stable", "http://example.com/s?b=1&a=2&b=0&a=1", "http://example.com/s?a=2&a=1&b=1&b=0"},
		{"names compare decoded", "http://example.com/s?%62=1&a=2", "http://example.com/s?a=2&b=1"},
		{"bare names", "http://example.com/s?flag&a=1&=x", "http://example.com/s?=x&a=1&flag"},
		{"empty query", "http://example.com/a?", "http://example.com/a"},
		{"empty params", "http://example.com/a?&&b=1&&a=2&", "http://example.com/a?a=2&b=1"},
		{"question mark in query", "http://example.com/a?u=/x?y", "http://example.com/a?u=/x?y"},
		{"semicolon not a separator", "http://example.com/a?b=1;a=2", "http://example.com/a?b=1;a=2"},
		// Tracking parameters.
		{"utm", "http://example.com/p?id=7&utm_source=news&utm_medium=mail&UTM_Campaign=x", "http://example.com/p?id=7"},
		{"click ids", "http://example.com/p?gclid=1&fbclid=2&msclkid=3&dclid=4&yclid=5&mc_cid=6&mc_eid=7&_ga=8&igshid=9&id=7", "http://example.com/p?id=7"},
		{"only tracking", "http://example.com/p?utm_source=x&gclid=y", "http://example.com/p"},
		{"escaped tracking name", "http://example.com/p?utm%5Fsource=x&id=1", "http://example.com/p?id=1"},
		{"near names kept", "http://example.com/p?utm=1&xgclid=2&gclid_x=3", "http://example.com/p?gclid_x=3&utm=1&xgclid=2"},
	} {
		got, err := crawl.CanonicalURL(c.in, crawl.CanonOptions{})
		if err != nil || got != c.want {
			t.Errorf("%s: CanonicalURL(%q) = %q, %v; want %q", c.name, c.in, got, err, c.want)
		}
		// A canonical URL is its own canonical form.
		if again, err := crawl.CanonicalURL(got, crawl.CanonOptions{}); err != nil || again != got {
			t.Errorf("%s: CanonicalURL(%q) = %q, %v; not idempotent", c.name, got, again, err)
		}
	}
}

func TestCanonicalURLOptions(t *testing.T) {
	const in = "http://example.com/p?z=1&utm_source=x&PHPSESSID=abc&a=2&sessionid=9&gclid=g&ref_top=1"
	for _, c := range []struct {
		name string
		opts crawl.CanonOptions
		want string
	}{
		{"defaults", crawl.CanonOptions{}, "http://example.com/p?PHPSESSID=abc&a=2&ref_top=1&sessionid=9&z=1"},
		{"keep order", crawl.CanonOptions{KeepQueryOrder: true}, "http://example.com/p?z=1&PHPSESSID=abc&a=2&sessionid=9&ref_top=1"},
		{"keep tracking", crawl.CanonOptions{KeepTracking: true}, "http://example.com/p?PHPSESSID=abc&a=2&gclid=g&ref_top=1&sessionid=9&utm_source=x&z=1"},
		{"drop patterns", crawl.CanonOptions{DropParams: []string{"*sessid*", "sessionid", "ref_*"}}, "http://example.com/p?a=2&z=1"},
		{"drop exact only", crawl.CanonOptions{DropParams: []string{"ref"}}, "http://example.com/p?PHPSESSID=abc&a=2&ref_top=1&sessionid=9&z=1"},
		{"keep tracking, drop patterns", crawl.CanonOptions{KeepTracking: true, DropParams: []string{"*SESS*"}}, "http://example.com/p?a=2&gclid=g&ref_top=1&utm_source=x&z=1"},
		{"all three", crawl.CanonOptions{KeepQueryOrder: true, KeepTracking: true, DropParams: []string{"z", "a*"}}, "http://example.com/p?utm_source=x&PHPSESSID=abc&sessionid=9&gclid=g&ref_top=1"},
	} {
		got, err := crawl.CanonicalURL(in, c.opts)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v\n want %q", c.name, got, err, c.want)
		}
	}
}

func TestCanonicalURLRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ftp://example.com/a", `canonical URL of "ftp://example.com/a": not an absolute http(s) URL; only http://host/… and https://host/… are accepted`},
		{"mailto:bob@example.com", `canonical URL of "mailto:bob@example.com": not an absolute http(s) URL; only http://host/… and https://host/… are accepted`},
		{"/relative/path", `canonical URL of "/relative/path": not an absolute http(s) URL; only http://host/… and https://host/… are accepted`},
		{"http:/one-slash", `canonical URL of "http:/one-slash": not an absolute http(s) URL; only http://host/… and https://host/… are accepted`},
		{"", `canonical URL of "": not an absolute http(s) URL; only http://host/… and https://host/… are accepted`},
		{"http:///path", `canonical URL of "http:///path": no host; want http(s)://host/…`},
		{"http://bob:s3cret@:80/", `canonical URL of "http://bob:***@:80/": no host; want http(s)://host/…`},
		{"http://example.com/a%zzb#frag", `canonical URL of "http://example.com/a%zzb#frag": path: "%zz" is not a percent-escape (want % and two hex digits; a literal % is written %25)`},
		{"http://example.com/a%zzb", `canonical URL of "http://example.com/a%zzb": path: "%zz" is not a percent-escape (want % and two hex digits; a literal % is written %25)`},
		{"http://example.com/100%", `canonical URL of "http://example.com/100%": path: "%" is not a percent-escape (want % and two hex digits; a literal % is written %25)`},
		{"http://::1/", `canonical URL of "http://::1/": host ":" has ":", which a host name cannot hold`},
		{"http://example.com:99999/", `canonical URL of "http://example.com:99999/": port "99999" is not a number from 0 to 65535`},
		{"http://example.com:+80/", `canonical URL of "http://example.com:+80/": port "+80" is not a number from 0 to 65535`},
		{"http://[::1/", `canonical URL of "http://[::1/": IPv6 host "[::1" lacks its closing ]`},
		{"http://[::1]x/", `canonical URL of "http://[::1]x/": "x" after the IPv6 host [::1]; want :port`},
		{"http://exa mple.com/", `canonical URL of "http://exa mple.com/": host "exa mple.com" has " ", which a host name cannot hold`},
		{"http://ex%2Fample.com/", `canonical URL of "http://ex%2Fample.com/": host "ex/ample.com" has "/", which a host name cannot hold`},
		{"http://-bücher.example/", `canonical URL of "http://-bücher.example/": host "-bücher.example" is not a valid international domain name: idna: invalid label "-bücher"`},
	} {
		got, err := crawl.CanonicalURL(c.in, crawl.CanonOptions{})
		if err == nil || err.Error() != c.want {
			t.Errorf("CanonicalURL(%q) = %q, %v\n want error %s", c.in, got, err, c.want)
		}
	}
}

// canonicalPages serves pages whose <head> names a canonical link in the ways sites
// get it wrong.
var canonicalPages = map[string]string{
	"/relative":   `<html><head><link rel="canonical" href="../Item/7?utm_source=x&b=2&a=1#top"></head><body>x</body></html>`,
	"/based":      `<html><head><base href="/shop/"><link rel="canonical" href="item/7"></head><body>x</body></html>`,
	"/absolute":   `<html><head><link rel="canonical" href=" HTTPS://Other.Example:443/p/./q "></head></html>`,
	"/no-href":    `<html><head><link rel="canonical"><link rel="canonical" href=""><link rel="canonical" href="/second"></head></html>`,
	"/several":    `<html><head><link rel="alternate" href="/alt"><link rel="canonical" href="/first"><link rel="canonical" href="/second"></head></html>`,
	"/tokens":     `<html><head><link rel=" Canonical  alternate " href="/tokens-target"></head></html>`,
	"/substring":  `<html><head><link rel="noncanonical" href="/wrong"></head></html>`,
	"/unquoted":   `<link rel=canonical href=/a%2fb%20c/caf%c3%a9 d><p>no head element written</p>`,
	"/body-only":  `<html><head><title>t</title></head><body><link rel="canonical" href="/injected"></body></html>`,
	"/none":       `<html><head><title>t</title></head><body><a rel="canonical" href="/anchor">a</a></body></html>`,
	"/bad-scheme": `<html><head><link rel="canonical" href="javascript:void(0)"><link rel="canonical" href="http://bad%zz/"><link rel="canonical" href="/ok"></head></html>`,
	"/spaces":     `<html><head><link rel="canonical" href="/a%2Fb c/café?q=x y"></head></html>`,
}

func TestCanonicalLink(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/dir/relative", http.StatusFound)
			return
		}
		page, ok := canonicalPages[r.URL.Path]
		if !ok {
			page = canonicalPages["/"+r.URL.Path[len("/dir/"):]]
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)

	type link struct {
		URL   string `json:"url"`
		Found bool   `json:"found"`
	}
	task := crawl.HTMLTask("demo.canonical", func(p *crawl.Page, out *crawl.Out[link]) error {
		u, ok := crawl.CanonicalLink(p, crawl.CanonOptions{})
		out.Item("demo:canonical:"+p.URL, &link{URL: u, Found: ok})
		return nil
	})
	for _, c := range []struct{ path, want string }{
		{"/dir/relative", srv.URL + "/Item/7?a=1&b=2"},
		{"/moved", srv.URL + "/Item/7?a=1&b=2"}, // resolved against the URL redirected to
		{"/based", srv.URL + "/shop/item/7"},
		{"/absolute", "https://other.example/p/q"},
		{"/no-href", srv.URL + "/second"},
		{"/several", srv.URL + "/first"},
		{"/tokens", srv.URL + "/tokens-target"},
		{"/substring", ""},
		{"/unquoted", srv.URL + "/a%2Fb%20c/caf%C3%A9"},
		{"/spaces", srv.URL + "/a%2Fb%20c/caf%C3%A9?q=x%20y"},
		{"/body-only", ""},
		{"/none", ""},
		{"/bad-scheme", srv.URL + "/ok"},
	} {
		res, err := runTask(t, task, srv.URL+c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		got := res.Items[0].Data
		if got["url"] != c.want || got["found"] != (c.want != "") {
			t.Errorf("%s: CanonicalLink = %q, %v; want %q", c.path, got["url"], got["found"], c.want)
		}
	}
}
