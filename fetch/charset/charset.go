// Package charset turns fetched bodies into UTF-8, the one encoding the parsers and
// extractors downstream read: HTML by its declarations as a browser would, XML by its
// <?xml?> declaration, text (CSV, JSON) by its byte-order mark or Content-Type.
package charset

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	htmlcharset "golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Lookup finds an encoding by its WHATWG label (gbk, gb2312, gb18030, big5,
// shift_jis, euc-kr, iso-8859-1, windows-1251, utf-8, …).
func Lookup(name string) (encoding.Encoding, string, error) {
	name = strings.TrimSpace(name)
	e, canonical := htmlcharset.Lookup(name)
	if e == nil {
		return nil, "", fmt.Errorf("unknown encoding %q; use a name like utf-8, gbk, gb18030, big5, shift_jis, euc-kr or iso-8859-1", name)
	}
	return e, canonical, nil
}

// headerCharset is the charset parameter of a Content-Type header, or "".
func headerCharset(contentType string) string {
	if contentType == "" {
		return ""
	}
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return params["charset"]
}

// HTML returns an HTML body as UTF-8. The encoding is, in order: forced (the
// encoding param), a byte-order mark, the Content-Type charset, a <meta charset> or
// <meta http-equiv="Content-Type"> in the first 1024 bytes, UTF-8 when the body is
// valid UTF-8, else windows-1252 (what browsers assume).
func HTML(body []byte, contentType string, forced encoding.Encoding) ([]byte, error) {
	if forced != nil {
		return decodeWith(forced, bytes.TrimPrefix(body, utf8BOM))
	}
	if bytes.HasPrefix(body, utf8BOM) {
		return body[len(utf8BOM):], nil
	}
	head := body
	if len(head) > 1024 {
		head = head[:1024]
	}
	e, name, certain := htmlcharset.DetermineEncoding(head, contentType)
	if !certain && (name == "windows-1252" || name == "utf-8") && !declaresCharset(head) {
		// Nothing declared: DetermineEncoding only guessed from the first bytes.
		if utf8.Valid(body) {
			return body, nil
		}
	}
	if e == encoding.Nop || name == "utf-8" {
		return body, nil
	}
	return decodeWith(e, body)
}

// declaresCharset reports whether an HTML head names a charset in a meta tag.
func declaresCharset(head []byte) bool {
	return bytes.Contains(bytes.ToLower(head), []byte("charset"))
}

// Text returns a text body (CSV, JSON) as UTF-8: forced encoding, then a byte-order
// mark, then the Content-Type charset, else the body as is.
func Text(body []byte, contentType string, forced encoding.Encoding) ([]byte, error) {
	if forced != nil {
		return decodeWith(forced, bytes.TrimPrefix(body, utf8BOM))
	}
	if bytes.HasPrefix(body, utf8BOM) {
		return body[len(utf8BOM):], nil
	}
	if len(body) >= 2 && (body[0] == 0xFF && body[1] == 0xFE || body[0] == 0xFE && body[1] == 0xFF) {
		return decodeWith(unicode.UTF16(unicode.BigEndian, unicode.UseBOM), body)
	}
	if cs := headerCharset(contentType); cs != "" {
		if e, name, err := Lookup(cs); err == nil && name != "utf-8" {
			return decodeWith(e, body)
		}
	}
	return body, nil
}

// XML returns an XML body as UTF-8, in the encoding (in order) forced, of its
// byte-order mark, of its <?xml … encoding="…"?> declaration, or of the Content-Type
// charset. A declaration naming another encoding is rewritten to say UTF-8, so a parser
// that honours declarations does not decode twice.
func XML(body []byte, contentType string, forced encoding.Encoding) ([]byte, error) {
	label, _, _ := xmlDeclaredEncoding(body)
	e := forced
	switch {
	case e != nil:
	case bytes.HasPrefix(body, utf8BOM):
		return body[len(utf8BOM):], nil
	case len(body) >= 2 && (body[0] == 0xFF && body[1] == 0xFE || body[0] == 0xFE && body[1] == 0xFF):
		e = unicode.UTF16(unicode.BigEndian, unicode.UseBOM)
	case label != "":
		found, name, err := Lookup(label)
		if err != nil {
			return nil, err
		}
		if name != "utf-8" {
			e = found
		}
	default:
		if cs := headerCharset(contentType); cs != "" {
			if found, name, err := Lookup(cs); err == nil && name != "utf-8" {
				e = found
			}
		}
	}
	if e == nil {
		return body, nil
	}
	out, err := decodeWith(e, bytes.TrimPrefix(body, utf8BOM))
	if err != nil {
		return nil, err
	}
	if label, start, end := xmlDeclaredEncoding(out); label != "" {
		out = append(append(append([]byte{}, out[:start]...), "UTF-8"...), out[end:]...)
	}
	return out, nil
}

// xmlDeclaredEncoding returns the encoding an <?xml …?> declaration at the start of a
// document names, and where its value is; "" when there is none.
func xmlDeclaredEncoding(body []byte) (label string, start, end int) {
	lead := len(body) - len(bytes.TrimLeft(body, " \t\r\n"))
	head := body[lead:]
	if len(head) > 256 {
		head = head[:256]
	}
	if !bytes.HasPrefix(head, []byte("<?xml")) {
		return "", 0, 0
	}
	close := bytes.Index(head, []byte("?>"))
	if close < 0 {
		return "", 0, 0
	}
	decl := head[:close]
	i := bytes.Index(decl, []byte("encoding"))
	if i < 0 {
		return "", 0, 0
	}
	j := i + len("encoding")
	for j < len(decl) && (decl[j] == ' ' || decl[j] == '=' || decl[j] == '\t') {
		j++
	}
	if j >= len(decl) || (decl[j] != '"' && decl[j] != '\'') {
		return "", 0, 0
	}
	q := decl[j]
	k := bytes.IndexByte(decl[j+1:], q)
	if k < 0 {
		return "", 0, 0
	}
	return string(decl[j+1 : j+1+k]), lead + j + 1, lead + j + 1 + k
}

// PassThrough is an xml.Decoder CharsetReader for bodies already decoded to UTF-8.
func PassThrough(_ string, input io.Reader) (io.Reader, error) {
	return input, nil
}

func decodeWith(e encoding.Encoding, body []byte) ([]byte, error) {
	out, _, err := transform.Bytes(e.NewDecoder(), body)
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	return bytes.TrimPrefix(out, utf8BOM), nil
}
