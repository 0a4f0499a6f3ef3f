package crawl

import (
	"fmt"

	"golang.org/x/net/http/httpguts"
)

// CheckHeader refuses a request header that no HTTP request may carry: a name outside
// RFC 9110's token characters (a space, a colon, a line break …) or a value with a line
// break or NUL, which would end the header early and smuggle in another.
func CheckHeader(name, value string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("header name %q: use a name like X-Team: letters, digits and !#$%%&'*+-.^_`|~, without spaces, colons or line breaks", name)
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return fmt.Errorf("header %s: value %q has a line break or control character; give it on one line", name, value)
	}
	return nil
}
