package archive

import (
	"encoding/binary"
	"github.com/klauspost/compress/flate"
	"hash/crc32"
	"math/bits"
)

// Each WARC record is its own gzip member, so a reader can seek to one record. Most
// records of a crawl are small (a request is a few hundred bytes, many pages a few KiB),
// and for them a general deflate compressor spends more time building the member's
// Huffman tables than compressing: two thirds of the archive's CPU per page. A small
// member here is one deflate block with the fixed Huffman codes of RFC 1951 (3.2.6),
// which need no table, over LZ77 matches found with a one-probe hash table: three to
// four times faster, for about a quarter more bytes. A record of dynamicFrom bytes or
// more, where tables pay for themselves, is compressed with klauspost/compress's
// deflate (its default level): half the speed, a quarter fewer bytes. Data that does not
// compress (a body that came gzip-encoded) is stored. Every gzip reader reads all three.

const (
	hashBits  = 14
	maxMatch  = 258
	minMatch  = 4 // matches are found on 4 bytes (deflate allows 3)
	maxDist   = 1 << 15
	storedMax = 1<<16 - 1 // bytes in one stored block
	// dynamicFrom is the size from which a record is compressed with dynamic tables.
	dynamicFrom = 8 << 10
)

// gzipper compresses one gzip member at a time; its table is kept between members, the
// positions in it offset so that an old member's entries are never taken for this one's.
type gzipper struct {
	table [1 << hashBits]int32 // base + position + 1 of the last 4 bytes hashed there
	base  int32
	bw    bitWriter
	large *flate.Writer // for records of dynamicFrom bytes or more
	out   sliceWriter
}

// appendGzip appends src as one gzip member to dst.
func (z *gzipper) appendGzip(dst, src []byte) []byte {
	return z.appendMember(dst, src, len(src) < dynamicFrom)
}

// appendMember appends src as one gzip member to dst, deflated with the fixed codes or
// with dynamic tables, or stored if that is shorter.
func (z *gzipper) appendMember(dst, src []byte, fixed bool) []byte {
	dst = append(dst, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff) // deflate, no name or time, OS unknown
	start := len(dst)
	if fixed && len(src) < 1<<29 { // positions in the table are int32
		dst = z.deflate(dst, src)
	} else {
		dst = z.deflateDynamic(dst, src)
	}
	if len(dst)-start > len(src)+len(src)/storedMax*5+5 {
		dst = appendStored(dst[:start], src)
	}
	dst = binary.LittleEndian.AppendUint32(dst, crc32.ChecksumIEEE(src))
	return binary.LittleEndian.AppendUint32(dst, uint32(len(src)))
}

// deflateDynamic appends src deflated with dynamic tables.
func (z *gzipper) deflateDynamic(dst, src []byte) []byte {
	z.out = dst
	if z.large == nil {
		z.large, _ = flate.NewWriter(&z.out, flate.DefaultCompression) // a valid level: no error
	} else {
		z.large.Reset(&z.out)
	}
	_, _ = z.large.Write(src) // writes to memory: no error
	_ = z.large.Close()
	return z.out
}

// sliceWriter appends what is written to it.
type sliceWriter []byte

func (s *sliceWriter) Write(p []byte) (int, error) {
	*s = append(*s, p...)
	return len(p), nil
}

// deflate appends src as one final block with the fixed codes.
func (z *gzipper) deflate(dst, src []byte) []byte {
	if int64(z.base)+int64(len(src)) >= 1<<30 { // positions would overflow: start the table again
		z.table = [1 << hashBits]int32{}
		z.base = 0
	}
	base := z.base
	z.base += int32(len(src)) + 1
	w := &z.bw
	w.reset(dst)
	w.bits(3, 3) // BFINAL, BTYPE=01: fixed Huffman codes
	lit := 0     // src[lit:i] are literals still to write
	misses := 0
	for i := 0; i+minMatch <= len(src); {
		v := binary.LittleEndian.Uint32(src[i:])
		h := (v * 2654435761) >> (32 - hashBits)
		cand := int(z.table[h]-base) - 1
		z.table[h] = base + int32(i) + 1
		if cand < 0 || i-cand > maxDist || binary.LittleEndian.Uint32(src[cand:]) != v {
			// Skip ahead faster the longer nothing matched, so data that does not
			// compress costs little to find out.
			misses++
			i += 1 + misses>>5
			continue
		}
		misses = 0
		n := minMatch + matchLen(src[i+minMatch:], src[cand+minMatch:], maxMatch-minMatch)
		for _, c := range src[lit:i] {
			w.literal(c)
		}
		w.match(n, i-cand)
		i += n
		lit = i
		if i+minMatch <= len(src) { // the match's end starts the next one often
			p := i - 1
			z.table[(binary.LittleEndian.Uint32(src[p:])*2654435761)>>(32-hashBits)] = base + int32(p) + 1
		}
	}
	for _, c := range src[lit:] {
		w.literal(c)
	}
	w.code(fixedLit[256])
	return w.close()
}

// matchLen is how many bytes a and b share from the start, at most limit.
func matchLen(a, b []byte, limit int) int {
	limit = min(limit, len(a), len(b))
	n := 0
	for n+8 <= limit {
		if x := binary.LittleEndian.Uint64(a[n:]) ^ binary.LittleEndian.Uint64(b[n:]); x != 0 {
			return n + bits.TrailingZeros64(x)>>3
		}
		n += 8
	}
	for n < limit && a[n] == b[n] {
		n++
	}
	return n
}

// appendStored appends src as stored blocks, the last one final.
func appendStored(dst, src []byte) []byte {
	for {
		n := min(len(src), storedMax)
		final := byte(0)
		if n == len(src) {
			final = 1
		}
		dst = append(dst, final)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(n))
		dst = binary.LittleEndian.AppendUint16(dst, ^uint16(n))
		dst = append(dst, src[:n]...)
		if src = src[n:]; final == 1 {
			return dst
		}
	}
}

// huffCode is a code as written: its bits already reversed (deflate sends a Huffman
// code's first bit first, into the low bits of the stream), and its length.
type huffCode struct {
	bits uint16
	n    uint8
}

// The fixed codes, and the length and distance symbols with their extra bits.
var (
	fixedLit  [288]huffCode
	fixedDist [30]huffCode
	lenSym    [maxMatch + 1]struct{ sym, extra, base uint16 } // by match length
)

func init() {
	for s := range fixedLit {
		var code, n uint16
		switch {
		case s < 144:
			code, n = 0x30+uint16(s), 8
		case s < 256:
			code, n = 0x190+uint16(s-144), 9
		case s < 280:
			code, n = uint16(s-256), 7
		default:
			code, n = 0xc0+uint16(s-280), 8
		}
		fixedLit[s] = huffCode{bits.Reverse16(code) >> (16 - n), uint8(n)}
	}
	for d := range fixedDist {
		fixedDist[d] = huffCode{bits.Reverse16(uint16(d)) >> 11, 5}
	}
	// Lengths 3–10 have symbols 257–264 without extra bits; then every four symbols
	// take one more extra bit, up to 284; 258 is symbol 285.
	sym, base, extra := uint16(257), uint16(3), uint16(0)
	for sym < 285 {
		for l := base; l < base+1<<extra; l++ {
			lenSym[l] = struct{ sym, extra, base uint16 }{sym, extra, base}
		}
		base += 1 << extra
		sym++
		if sym >= 265 && (sym-265)%4 == 0 {
			extra++
		}
	}
	lenSym[258] = struct{ sym, extra, base uint16 }{285, 0, 258}
}

// bitWriter writes deflate's bit stream, low bits first, appending to a byte slice.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) reset(dst []byte) { w.out, w.acc, w.nacc = dst, 0, 0 }

func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.nacc
	w.nacc += n
	if w.nacc >= 32 {
		w.out = binary.LittleEndian.AppendUint32(w.out, uint32(w.acc))
		w.acc >>= 32
		w.nacc -= 32
	}
}

func (w *bitWriter) code(c huffCode) { w.bits(uint64(c.bits), uint(c.n)) }

func (w *bitWriter) literal(c byte) { w.code(fixedLit[c]) }

// match writes a length of 4–258 and a distance of 1–32768.
func (w *bitWriter) match(length, dist int) {
	l := lenSym[length]
	w.code(fixedLit[l.sym])
	if l.extra > 0 {
		w.bits(uint64(length)-uint64(l.base), uint(l.extra))
	}
	d := uint32(dist - 1)
	if d < 4 {
		w.code(fixedDist[d])
		return
	}
	extra := uint(bits.Len32(d)) - 2
	w.code(fixedDist[2*(extra+1)+uint(d>>extra&1)])
	w.bits(uint64(d&(1<<extra-1)), extra)
}

// close writes the bits left, padded to a byte, and returns the stream.
func (w *bitWriter) close() []byte {
	for w.nacc > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nacc -= min(w.nacc, 8)
	}
	return w.out
}
