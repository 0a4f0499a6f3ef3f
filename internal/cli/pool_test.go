package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/trawlerhq/trawler/internal/external"
)

// TestPoolCommandsHideValues: the pool commands list, count and show items by id with
// their values masked; only --reveal prints a value, and remove takes the id or the value.
func TestPoolCommandsHideValues(t *testing.T) {
	mr := miniredis.RunT(t)
	run := func(args ...string) (string, error) {
		t.Helper()
		s := &Settings{Redis: mr.Addr()}
		if i := slices.Index(args, "--json"); i >= 0 { // a flag of the root command
			s.JSON, args = true, slices.Delete(slices.Clone(args), i, i+1)
		}
		cmd := poolCmd(s)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("pool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	const (
		proxy   = "http://bob:hunter2pw@127.0.0.1:3129"
		cookie  = "sid=c00kie-secret-0123456789abcdef"
		cookie2 = "sid=c00kie-secret-second-session"
	)
	secrets := []string{"hunter2pw", "c00kie-secret"}
	must("add", "proxy", proxy, "--site", "*")
	must("add", "cookie", cookie, "--name", "reader1", "--site", "demo")
	must("add", "cookie", cookie2, "--site", "demo")
	if out, err := run("add", "cookie", "a=1", "b=2", "--name", "x", "--site", "demo"); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Errorf("--name with two values: %v %s", err, out)
	}

	for _, args := range [][]string{
		{"list"}, {"list", "--json"},
		{"stats", "cookie", "--site", "demo"}, {"stats", "cookie", "--site", "demo", "--json"},
		{"stats", "proxy", "--site", "*"}, {"stats", "proxy", "--site", "*", "--json"},
		{"show", "cookie", "reader1", "--site", "demo"}, {"show", "proxy", proxy, "--site", "*", "--json"},
	} {
		out := must(args...)
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("pool %s shows %q:\n%s", strings.Join(args, " "), s, out)
			}
		}
	}
	if out := must("stats", "proxy", "--site", "*"); !strings.Contains(out, external.ItemID(proxy)) || !strings.Contains(out, "http://bob:***@127.0.0.1:3129") {
		t.Errorf("proxy stats want its hashed id and masked URL:\n%s", out)
	}
	if out := must("stats", "cookie", "--site", "demo"); !strings.Contains(out, "reader1") || !strings.Contains(out, external.ItemID(cookie2)) || !strings.Contains(out, "sid=…") {
		t.Errorf("cookie stats want the name, the hashed id and the cookie's name:\n%s", out)
	}

	if out := must("show", "cookie", "reader1", "--site", "demo", "--reveal"); !strings.Contains(out, cookie) {
		t.Errorf("show --reveal: no value:\n%s", out)
	}
	if out := must("list", "--reveal"); !strings.Contains(out, proxy) || !strings.Contains(out, cookie) || !strings.Contains(out, cookie2) {
		t.Errorf("list --reveal: values missing:\n%s", out)
	}
	if _, err := run("show", "cookie", "nobody", "--site", "demo"); err == nil || !strings.Contains(err.Error(), "pool stats cookie --site demo") {
		t.Errorf("show an unknown item: %v", err)
	}

	if out := must("remove", "proxy", external.ItemID(proxy), "--site", "*"); !strings.Contains(out, "removed 1") {
		t.Errorf("remove by id: %s", out)
	}
	if out := must("remove", "cookie", cookie2, "reader1", "--site", "demo"); !strings.Contains(out, "removed 2") {
		t.Errorf("remove by value and name: %s", out)
	}

	// Settings alone: the command says what it set, and the pool has it.
	if out := must("add", "device_id", "--site", "demo", "--target", "3", "--cooldown", "10m"); out != "pool device_id (tenant default, site demo): added 0 item(s); set cooldown 10m0s, target 3\n" {
		t.Errorf("add with settings only printed %q", out)
	}
	if out := must("stats", "device_id", "--site", "demo"); !strings.Contains(out, "target 3") {
		t.Errorf("stats after --target 3:\n%s", out)
	}
}
