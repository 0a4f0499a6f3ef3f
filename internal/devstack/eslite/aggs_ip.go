package eslite

import (
	"bytes"
	"math/big"
	"net/netip"
	"sort"
	"strconv"
)

// ipRange is one range of an ip_range aggregation, its bounds as 16-byte addresses
// (IPv4 mapped into IPv6) and as they are reported.
type ipRange struct {
	key            string
	from, to       *big.Int
	fromStr, toStr string
	hasFrom, hasTo bool
}

func ipBig(a netip.Addr) *big.Int {
	b := a.As16()
	return new(big.Int).SetBytes(b[:])
}

func (a *aggDef) configureIPRange() error {
	rs, ok := a.opts["ranges"].([]any)
	if !ok || len(rs) == 0 {
		return badRequest("illegal_argument_exception", "No [ranges] specified for the [%s] aggregation", a.name)
	}
	for k := range a.opts {
		switch k {
		case "field", "ranges", "keyed", "missing":
		default:
			return parsingErr("[ip_range] aggregation [%s] does not support [%s]", a.name, k)
		}
	}
	a.keyed = boolOpt(a.opts["keyed"])
	for _, r := range rs {
		rm, _ := r.(map[string]any)
		var ir ipRange
		for k, v := range rm {
			if v == nil {
				continue
			}
			s := scalarString(v)
			switch k {
			case "from", "to":
				addr, err := netip.ParseAddr(s)
				if err != nil {
					return badRequest("illegal_argument_exception", "'%s' is not an IP string literal.", s)
				}
				if k == "from" {
					ir.from, ir.fromStr, ir.hasFrom = ipBig(addr), addr.String(), true
				} else {
					ir.to, ir.toStr, ir.hasTo = ipBig(addr), addr.String(), true
				}
			case "mask":
				p, err := netip.ParsePrefix(s)
				if err != nil {
					return badRequest("illegal_argument_exception", "invalid mask [%s]", s)
				}
				p = p.Masked()
				ir.key = s
				start := p.Addr()
				ir.from, ir.fromStr, ir.hasFrom = ipBig(start), start.String(), true
				bits := start.BitLen()
				size := new(big.Int).Lsh(big.NewInt(1), uint(bits-p.Bits()))
				end := new(big.Int).Add(ir.from, size)
				limit := new(big.Int).Lsh(big.NewInt(1), 128)
				if start.Is4() {
					limit = new(big.Int).Add(ipBig(netip.MustParseAddr("255.255.255.255")), big.NewInt(1))
				}
				if end.Cmp(limit) < 0 {
					var b [16]byte
					end.FillBytes(b[:])
					addr := netip.AddrFrom16(b)
					if start.Is4() {
						addr = addr.Unmap()
					}
					ir.to, ir.toStr, ir.hasTo = end, addr.String(), true
				}
			case "key":
				ir.key = s
			default:
				return parsingErr("[ip_range] aggregation [%s]: unknown range key [%s]", a.name, k)
			}
		}
		if ir.key == "" {
			f, t := "*", "*"
			if ir.hasFrom {
				f = ir.fromStr
			}
			if ir.hasTo {
				t = ir.toStr
			}
			ir.key = f + "-" + t
		}
		a.ipRanges = append(a.ipRanges, ir)
	}
	return nil
}

func (a *aggDef) ipRangeRun(docs []map[string]any) (map[string]any, error) {
	buckets := []any{}
	for _, r := range a.ipRanges {
		var in []map[string]any
		for _, d := range docs {
			for _, v := range a.values(d) {
				addr, err := netip.ParseAddr(scalarString(v))
				if err != nil {
					continue
				}
				n := ipBig(addr)
				if (!r.hasFrom || n.Cmp(r.from) >= 0) && (!r.hasTo || n.Cmp(r.to) < 0) {
					in = append(in, d)
					break
				}
			}
		}
		extra := map[string]any{}
		if r.hasFrom {
			extra["from"] = r.fromStr
		}
		if r.hasTo {
			extra["to"] = r.toStr
		}
		b, err := a.bucket(r.key, in, extra)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	if a.keyed {
		return a.bucketsOut(buckets), nil
	}
	out, err := a.applyParentPipelines(buckets)
	if err != nil {
		return nil, err
	}
	return map[string]any{"buckets": out}, nil
}

func (a *aggDef) configureIPPrefix() error {
	for k := range a.opts {
		switch k {
		case "field", "prefix_len", "is_ipv6", "append_prefix_len", "keyed", "min_doc_count":
		default:
			return parsingErr("[ip_prefix] aggregation [%s] does not support [%s]", a.name, k)
		}
	}
	if _, ok := a.opts["prefix_len"]; !ok {
		return badRequest("illegal_argument_exception", "[prefix_len] is required for aggregation [%s]", a.name)
	}
	n, err := intParam(a.opts["prefix_len"], "prefix_len", 0)
	if err != nil {
		return err
	}
	a.isIPv6 = boolOpt(a.opts["is_ipv6"])
	bits := 32
	if a.isIPv6 {
		bits = 128
	}
	if n < 0 || n > bits {
		return badRequest("illegal_argument_exception", "[prefix_len] must be in range [0, %d] for aggregation [%s]", bits, a.name)
	}
	a.prefixLen = n
	a.keyed = boolOpt(a.opts["keyed"])
	if a.minDocCount, err = intParam(a.opts["min_doc_count"], "min_doc_count", 1); err != nil {
		return err
	}
	return nil
}

// ipPrefixRun buckets addresses by their network. Elasticsearch reads every address as
// 16 bytes (IPv4 mapped into IPv6): with is_ipv6 the first prefix_len bits of those are
// kept, without it the prefix applies to the last four bytes, read as an IPv4 address,
// whatever the address was. Buckets come in address order.
func (a *aggDef) ipPrefixRun(docs []map[string]any) (map[string]any, error) {
	type group struct {
		subnet [16]byte
		docs   []map[string]any
	}
	groups := map[[16]byte]*group{}
	for _, d := range docs {
		seen := map[[16]byte]bool{}
		for _, v := range a.values(d) {
			addr, err := netip.ParseAddr(scalarString(v))
			if err != nil {
				continue
			}
			b := addr.As16()
			var subnet [16]byte
			if a.isIPv6 {
				subnet = maskBits(b, 0, a.prefixLen)
			} else {
				subnet = maskBits(b, 12, a.prefixLen)
			}
			if seen[subnet] {
				continue
			}
			seen[subnet] = true
			g, ok := groups[subnet]
			if !ok {
				g = &group{subnet: subnet}
				groups[subnet] = g
			}
			g.docs = append(g.docs, d)
		}
	}
	list := make([]*group, 0, len(groups))
	for _, g := range groups {
		if docCount(g.docs) >= a.minDocCount {
			list = append(list, g)
		}
	}
	sort.Slice(list, func(i, j int) bool { return bytes.Compare(list[i].subnet[:], list[j].subnet[:]) < 0 })
	buckets := []any{}
	for _, g := range list {
		var key string
		extra := map[string]any{"is_ipv6": a.isIPv6, "prefix_len": a.prefixLen}
		if a.isIPv6 {
			key = netip.AddrFrom16(g.subnet).Unmap().String()
		} else {
			key = netip.AddrFrom4([4]byte(g.subnet[12:])).String()
			mask := maskBits([16]byte{12: 255, 13: 255, 14: 255, 15: 255}, 12, a.prefixLen)
			extra["netmask"] = netip.AddrFrom4([4]byte(mask[12:])).String()
		}
		if boolOpt(a.opts["append_prefix_len"]) {
			key += "/" + strconv.Itoa(a.prefixLen)
		}
		b, err := a.bucket(key, g.docs, extra)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	return a.bucketsOut(buckets), nil
}

// maskBits keeps the first n bits of b counted from byte from, and zeroes every other
// bit.
func maskBits(b [16]byte, from, n int) [16]byte {
	var out [16]byte
	for i := from; i < 16; i++ {
		keep := n - (i-from)*8
		switch {
		case keep >= 8:
			out[i] = b[i]
		case keep > 0:
			out[i] = b[i] & byte(0xff<<(8-keep))
		}
	}
	return out
}
