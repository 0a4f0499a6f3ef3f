package archive

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Records are written here rather than by gowarc's record builder: the builder buffered,
// re-parsed and validated every record it built, which was half the archive's CPU per
// page. What is written is checked the other way round: gowarc reads every record
// back under its strict validation in the tests (and in reparse and the console), and
// so does an independent reader (tests/archive_test.go).

// fields are a record's named fields, name and value in turn, in the order written.
type fields []string

func (f *fields) add(name, value string) { *f = append(*f, name, value) }

// revisitProfile is the WARC 1.1 profile of a revisit record whose payload is identical
// to that of the record it refers to.
const revisitProfile = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

// writeRecord writes one WARC/1.1 record to w: its fields, then the Content-Length and
// WARC-Block-Digest of the block (the parts of block, in turn), then the block.
func writeRecord(w io.Writer, head *bytes.Buffer, f fields, block ...[]byte) error {
	n := 0
	d := sha1.New()
	for _, b := range block {
		n += len(b)
		d.Write(b)
	}
	var sum [sha1.Size]byte
	head.Reset()
	head.WriteString("WARC/1.1\r\n")
	for i := 0; i+1 < len(f); i += 2 {
		head.WriteString(f[i])
		head.WriteString(": ")
		head.WriteString(fieldValue(f[i+1]))
		head.WriteString("\r\n")
	}
	head.WriteString("Content-Length: ")
	head.WriteString(strconv.Itoa(n))
	head.WriteString("\r\nWARC-Block-Digest: ")
	head.WriteString(sha1Digest(d.Sum(sum[:0])))
	head.WriteString("\r\n\r\n")
	if _, err := w.Write(head.Bytes()); err != nil {
		return err
	}
	for _, b := range block {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\r\n\r\n")
	return err
}

// fieldValue is a value as one field line: a line break in it (which no URL or header
// the fetcher hands on holds) would end the field early, so it becomes a space.
func fieldValue(v string) string {
	if strings.ContainsAny(v, "\r\n") {
		return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(v)
	}
	return v
}

// sha1Digest is WARC's labelled digest of a sha1 sum, in base32 as most WARC tools
// write and check them.
func sha1Digest(sum []byte) string {
	return "sha1:" + base32.StdEncoding.EncodeToString(sum)
}

// payloadDigest is the WARC payload digest of a body.
func payloadDigest(body []byte) string {
	sum := sha1.Sum(body)
	return sha1Digest(sum[:])
}

// requestHead is the request as sent, up to its body: request line and headers.
func requestHead(b *bytes.Buffer, method, rawURL, proto string, h http.Header) {
	target := "/"
	if u, err := url.Parse(rawURL); err == nil {
		target = u.RequestURI()
	}
	b.WriteString(method)
	b.WriteByte(' ')
	b.WriteString(target)
	b.WriteByte(' ')
	b.WriteString(httpProto(proto))
	b.WriteString("\r\n")
	_ = h.Write(b)
	b.WriteString("\r\n")
}

// framing are the response headers that described how the body came over the wire;
// the record holds the entity body whole, with its own Content-Length.
var framing = map[string]bool{"Transfer-Encoding": true, "Content-Length": true}

// responseHead is the response as received, up to its body: status line and headers.
func responseHead(b *bytes.Buffer, proto, status string, h http.Header, bodyLen int) {
	b.WriteString(httpProto(proto))
	b.WriteByte(' ')
	b.WriteString(status)
	b.WriteString("\r\n")
	_ = h.WriteSubset(b, framing)
	b.WriteString("Content-Length: ")
	b.WriteString(strconv.Itoa(bodyLen))
	b.WriteString("\r\n\r\n")
}

// httpProto is the version of a status or request line; WARC readers parse HTTP/1.x
// lines, and an HTTP/2 exchange's fields fit them.
func httpProto(p string) string {
	if p == "" || strings.HasPrefix(p, "HTTP/2") || strings.HasPrefix(p, "HTTP/3") {
		return "HTTP/1.1"
	}
	return p
}

// newRecordID is a record id: a random (version 4) UUID as a URN.
func newRecordID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return "<urn:uuid:" + string(s[:]) + ">"
}
