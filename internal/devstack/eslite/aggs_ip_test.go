package eslite_test

import (
	"strings"
	"testing"
)

func TestIPPrefix(t *testing.T) {
	e := start(t, t.TempDir())
	defer e.stop()
	e.ok(e.es.Indices.Create("net", e.es.Indices.Create.WithBody(strings.NewReader(`{"mappings":{"properties":{"ip":{"type":"ip"},"n":{"type":"long"}}}}`))))
	var b strings.Builder
	for _, d := range []string{`{"ip":"192.168.1.10","n":1}`, `{"ip":"192.168.2.7","n":2}`, `{"ip":"192.168.1.99","n":3}`,
		`{"ip":"2001:db8:a4f8:112a:6001:0:12:7f10","n":4}`} {
		b.WriteString("{\"index\":{}}\n" + d + "\n")
	}
	e.ok(e.es.Bulk(strings.NewReader(b.String()), e.es.Bulk.WithIndex("net"), e.es.Bulk.WithRefresh("true")))
	// IPv4 prefixes apply to the last four bytes of every address, an IPv6 one's too
	// (…:0012:7f10 is 0.18.127.16), and come in address order.
	got := e.aggJSON("net", "", `{"p":{"ip_prefix":{"field":"ip","prefix_len":24},"aggs":{"s":{"sum":{"field":"n"}}}}}`)
	want := `{"p":{"buckets":[` +
		`{"doc_count":1,"is_ipv6":false,"key":"0.18.127.0","netmask":"255.255.255.0","prefix_len":24,"s":{"value":4}},` +
		`{"doc_count":2,"is_ipv6":false,"key":"192.168.1.0","netmask":"255.255.255.0","prefix_len":24,"s":{"value":4}},` +
		`{"doc_count":1,"is_ipv6":false,"key":"192.168.2.0","netmask":"255.255.255.0","prefix_len":24,"s":{"value":2}}]}}`
	if got != want {
		t.Errorf("ipv4 prefix:\n got  %s\n want %s", got, want)
	}
	// IPv6 prefixes keep the first bits of the 16 bytes, so IPv4 addresses (::ffff:…)
	// fall under ::.
	got = e.aggJSON("net", "", `{"p":{"ip_prefix":{"field":"ip","is_ipv6":true,"prefix_len":64,"append_prefix_len":true}}}`)
	want = `{"p":{"buckets":[{"doc_count":3,"is_ipv6":true,"key":"::/64","prefix_len":64},{"doc_count":1,"is_ipv6":true,"key":"2001:db8:a4f8:112a::/64","prefix_len":64}]}}`
	if got != want {
		t.Errorf("ipv6 prefix:\n got  %s\n want %s", got, want)
	}
	if st, _ := e.searchStatus("net", `{"aggs":{"p":{"ip_prefix":{"field":"ip","prefix_len":33}}}}`); st != 400 {
		t.Errorf("prefix_len 33 for IPv4: status %d", st)
	}
}
