package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// validate runs `trawler validate` with ctx and returns what it printed on stderr.
func validate(ctx context.Context, args ...string) (string, error) {
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"validate"}, args...))
	err := root.ExecuteContext(ctx)
	return errOut.String(), err
}

// A file far larger than any chain (a data file, a log) is refused after 8 MiB instead
// of being read whole.
func TestValidateRefusesOversizedFile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	stderr, err := validate(context.Background(), big)
	if err == nil {
		t.Fatal("validate passed a 64 MiB file")
	}
	want := big + ": more than 8 MiB; a chain file is a few KB of YAML: name the chain file itself\n1 of 1 files have problems\n"
	if stderr != want {
		t.Fatalf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}

// A named pipe nobody writes to does not hold the command once it is interrupted
// (Ctrl-C and SIGTERM end the command's context).
func TestValidateStopsWhenInterrupted(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "chain.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // lets the reader that was given up on finish
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	ctx, interrupt := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := validate(ctx, fifo)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	interrupt()
	select {
	case err := <-done:
		want := fifo + ": stopped before the file was read (context canceled); a named pipe is read only once something writes to it"
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v\nwant %s", err, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("validate still waits on the pipe a minute after it was interrupted")
	}
}

// Start URLs that make the run's input larger than Temporal takes are refused when the
// chain is validated, naming the step and the limit, not at run time with a gRPC error.
func TestValidateRefusesSeedsOverTemporalLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: many-seeds\nsteps:\n  - id: sitemap\n    task: generic.sitemap\n    params:\n      urls:\n")
	for i := range 40000 {
		fmt.Fprintf(&b, "        - https://example.com/sitemaps/sitemap-%06d.xml\n", i)
	}
	file := filepath.Join(t.TempDir(), "seeds.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, err := validate(context.Background(), file)
	if err == nil {
		t.Fatal("validate passed a chain whose seeds exceed Temporal's payload limit")
	}
	want := file + `:3: step "sitemap": its params and start URLs make the run's input 5.2 MB, over Temporal's 2 MiB limit on one payload; ` +
		"put the URLs in a sitemap or CSV file a first step fetches (tasks generic.sitemap, generic.csv), or split them over several runs\n"
	if !strings.HasPrefix(stderr, want) {
		t.Fatalf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}

// A header name or value with a line break would end the request's header early and
// smuggle in another; validate refuses both, in a task's headers and in the header
// middleware.
func TestValidateRefusesHeadersWithLineBreaks(t *testing.T) {
	chain := `name: headers
middlewares:
  - header: {X-Team: "news\r\nX-Admin: 1"}
steps:
  - id: page
    task: generic.html_detail
    params:
      urls: [https://example.com/]
      headers: {"X-A\r\nX-Admin": "1"}
      fields: {title: h1}
`
	file := filepath.Join(t.TempDir(), "headers.yaml")
	if err := os.WriteFile(file, []byte(chain), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, err := validate(context.Background(), file)
	if err == nil {
		t.Fatal("validate passed headers with line breaks")
	}
	want := file + `:3: middlewares: middleware header: header X-Team: value "news\r\nX-Admin: 1" has a line break or control character; give it on one line` + "\n" +
		file + `:9: step "page": param headers: header name "X-A\r\nX-Admin": use a name like X-Team: letters, digits and !#$%&'*+-.^_` + "`|~, without spaces, colons or line breaks\n" +
		"1 of 1 files have problems\n"
	if stderr != want {
		t.Fatalf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}
