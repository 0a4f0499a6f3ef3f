package eslite

import (
	"math/big"
	"net/netip"
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
