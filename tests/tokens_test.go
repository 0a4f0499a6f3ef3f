package tests

import (
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// consoleProcess starts `trawler console` as its own process on a free loopback port,
// on the shared stack's Temporal and Redis, and returns its base URL once it answers.
func consoleProcess(t *testing.T, adminToken string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(buildTrawler(t), "console", "--listen", addr, "--token", adminToken,
		"--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace, "--redis", shared.redis.Addr())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + addr
	eventually(t, 30*time.Second, "console on "+addr+" answering /healthz", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return base
}

// statusWith is the status a console answers a token on the runs list.
func statusWith(t *testing.T, base, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/runs?tenant=tokacme", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A token created, rotated and revoked with the CLI takes effect at once on every
// console process of the fleet: two `trawler console` processes share only Redis.
func TestTokenRevocationReachesEveryConsoleProcess(t *testing.T) {
	consoles := []string{consoleProcess(t, "admin-tok-1"), consoleProcess(t, "admin-tok-1")}
	token := func(args ...string) (id, tok string) {
		t.Helper()
		out, stderr, code := trawler(t, append(append([]string{"token"}, args...), "--redis", shared.redis.Addr(), "--json")...)
		if code != 0 {
			t.Fatalf("trawler token %v: exit %d: %s", args, code, stderr)
		}
		var res struct {
			Principal struct{ ID string }
			Token     string
		}
		if err := json.Unmarshal([]byte(lastLine(out)), &res); err != nil {
			t.Fatalf("trawler token %v --json: %v in %q", args, err, out)
		}
		return res.Principal.ID, res.Token
	}
	want := func(what, tok string, status int) {
		t.Helper()
		for i, base := range consoles {
			if got := statusWith(t, base, tok); got != status {
				t.Errorf("%s: console %d answers %d, want %d", what, i+1, got, status)
			}
		}
	}

	id, tok := token("create", "--role", "analyst", "--tenant", "tokacme", "--name", "fleet-test")
	want("a new analyst token", tok, http.StatusOK)
	_, rotated := token("rotate", id)
	want("the token before rotation", tok, http.StatusUnauthorized)
	want("the rotated token", rotated, http.StatusOK)
	if out, stderr, code := trawler(t, "token", "revoke", id, "--redis", shared.redis.Addr()); code != 0 || !strings.Contains(out, "revoked fleet-test") {
		t.Fatalf("trawler token revoke: exit %d: %s%s", code, out, stderr)
	}
	want("the revoked token", rotated, http.StatusUnauthorized)
	want("the admin token", "admin-tok-1", http.StatusOK)
}
