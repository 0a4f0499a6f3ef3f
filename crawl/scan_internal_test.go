package crawl

import (
	"reflect"
	"strings"
	"testing"
)

// A tag that is not key:"value" pairs is refused by name. The type is built at run
// time because `go vet` rightly refuses such a tag written in source.
func TestMalformedTagIsRefused(t *testing.T) {
	typ := reflect.StructOf([]reflect.StructField{{Name: "Title", Type: reflect.TypeFor[string](), Tag: `css: "h1"`}})
	_, err := fieldsOfType(typ)
	want := "Title: tag `css: \"h1\"` is not key:\"value\" pairs separated by spaces (no space after the colon); `go vet` shows where"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("fieldsOfType: %v\nwant an error holding %s", err, want)
	}
}
