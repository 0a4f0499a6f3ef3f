package archive

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gunzip reads data as gzip with the standard library, one member exactly.
func gunzip(t testing.TB, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	zr.Multistream(false)
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("reading the member: %v", err)
	}
	if rest, _ := io.ReadAll(zr); len(rest) != 0 {
		t.Fatalf("%d bytes after the member", len(rest))
	}
	return got
}

// deflateCases are inputs that reach every path of the encoder: empty and tiny, HTML,
// runs longer than a match, matches at the far end of the window, data that does not
// compress (stored), and members larger than a stored block.
func deflateCases() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	far := append(append(random(1000), random(maxDist-1000)...), nil...)
	far = append(far, far[:1000]...) // a match exactly maxDist back
	tooFar := append(random(maxDist+1000), nil...)
	tooFar = append(tooFar, tooFar[:1000]...)
	return map[string][]byte{
		"empty":    {},
		"one":      {'x'},
		"three":    []byte("abc"),
		"html":     htmlBody(5 << 10),
		"run":      bytes.Repeat([]byte{'a'}, 10000),
		"two-run":  bytes.Repeat([]byte("ab"), 7000),
		"lengths":  []byte(strings.Repeat("0123456789", 40) + strings.Repeat("x", 259) + strings.Repeat("0123456789", 40)),
		"random":   random(100 << 10),
		"far":      far,
		"too-far":  tooFar,
		"big-html": htmlBody(300 << 10),
		"all-bytes": bytes.Repeat([]byte(func() string {
			var s strings.Builder
			for i := range 256 {
				s.WriteByte(byte(i))
			}
			return s.String()
		}()), 3),
	}
}

// Every member the encoder makes reads back as its input with the standard library's
// gzip reader, and one gzipper makes many members in a row (its table carried over).
func TestGzipMembersReadBack(t *testing.T) {
	var z gzipper
	cases := deflateCases()
	for round := range 2 {
		for name, src := range cases {
			for _, fixed := range []bool{true, false} {
				out := z.appendMember([]byte("prefix"), src, fixed)
				if !bytes.HasPrefix(out, []byte("prefix")) {
					t.Fatalf("%s: the bytes before the member were changed", name)
				}
				if got := gunzip(t, out[len("prefix"):]); !bytes.Equal(got, src) {
					t.Errorf("round %d, %s, fixed codes %v: read back %d bytes, want %d equal to the input", round, name, fixed, len(got), len(src))
				}
			}
		}
	}
	// Compression on what a crawl archives; random bytes are stored, barely larger.
	if n := len(z.appendGzip(nil, cases["html"])); n > len(cases["html"])/5 {
		t.Errorf("5 KiB of HTML took %d bytes", n)
	}
	for _, fixed := range []bool{true, false} {
		if n, want := len(z.appendMember(nil, cases["random"], fixed)), len(cases["random"])+18+2*5; n > want {
			t.Errorf("fixed codes %v: 100 KiB of random bytes took %d bytes, more than stored (%d)", fixed, n, want)
		}
	}
}

// The table's positions start again before they overflow, and a member made then reads
// back.
func TestGzipperTableStartsAgain(t *testing.T) {
	z := gzipper{base: 1<<30 - 10}
	src := htmlBody(4 << 10)
	if got := gunzip(t, z.appendMember(nil, src, true)); !bytes.Equal(got, src) {
		t.Fatal("member after the table started again does not read back")
	}
	if z.base > int32(len(src))+1 {
		t.Errorf("base %d: the table did not start again", z.base)
	}
}

func FuzzGzipMember(f *testing.F) {
	for _, src := range deflateCases() {
		if len(src) < 64<<10 {
			f.Add(src)
		}
	}
	var z gzipper
	f.Fuzz(func(t *testing.T, src []byte) {
		if got := gunzip(t, z.appendMember(nil, src, true)); !bytes.Equal(got, src) {
			t.Fatalf("%d bytes read back as %d different ones", len(src), len(got))
		}
	})
}

// BenchmarkGzipMember compresses Go's language spec (HTML) in record-sized pieces with
// the fixed codes and with dynamic tables:
//
//	go test -run X -bench BenchmarkGzipMember ./internal/archive
func BenchmarkGzipMember(b *testing.B) {
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	spec, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "doc", "go_spec.html"))
	if err != nil || len(spec) < 100000+128<<10 {
		b.Fatalf("Go's spec as a page to compress: %v", err)
	}
	for _, n := range []int{700, 2 << 10, 8 << 10, 32 << 10, 128 << 10} {
		src := spec[100000 : 100000+n]
		for _, fixed := range []bool{true, false} {
			b.Run(fmt.Sprintf("%d/fixed=%v", n, fixed), func(b *testing.B) {
				var z gzipper
				var out []byte
				b.SetBytes(int64(n))
				for b.Loop() {
					out = z.appendMember(out[:0], src, fixed)
				}
				b.ReportMetric(float64(len(out))/float64(n), "ratio")
			})
		}
	}
}
