package es_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/storage/es"
)

// The client takes user:password@ from the address, and refuses a server that does not
// answer as Elasticsearch, naming the check and the fix.
func TestClientAuthAndProductCheck(t *testing.T) {
	var user, pass string
	product := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ = r.BasicAuth()
		if product != "" {
			w.Header().Set("X-Elastic-Product", product)
		}
		w.Write([]byte(`{"version":{"number":"8.15.0"}}`))
	}))
	defer srv.Close()
	addr := strings.Replace(srv.URL, "http://", "http://analyst:s3cret@", 1)
	c, err := es.Auth{}.NewClient([]string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Info()
	if err == nil || !strings.Contains(err.Error(), "did not answer as Elasticsearch") || !strings.Contains(err.Error(), "check the address") {
		t.Fatalf("a server that is not Elasticsearch: %v", err)
	}
	if user != "analyst" || pass != "s3cret" {
		t.Errorf("basic auth %q/%q, want the address's analyst/s3cret", user, pass)
	}
	product = "Elasticsearch"
	res, err := c.Info()
	if err != nil || res.IsError() {
		t.Fatalf("Elasticsearch's answer: %v %v", err, res)
	}
	res.Body.Close()
	if _, err := (es.Auth{}).NewClient(nil, nil); err == nil || err.Error() != "no Elasticsearch address" {
		t.Errorf("no address: %v", err)
	}
}
