package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type doc = map[string]any

// manifest is one YAML document and where it came from.
type manifest struct {
	file string
	d    doc
}

func get(d any, path ...string) any {
	for _, p := range path {
		m, ok := d.(doc)
		if !ok {
			return nil
		}
		d = m[p]
	}
	return d
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func list(v any) []any { l, _ := v.([]any); return l }

func readManifests(t *testing.T, files []string) []manifest {
	t.Helper()
	var out []manifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 1; ; i++ {
			var d doc
			err := dec.Decode(&d)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if d != nil {
				out = append(out, manifest{f, d})
			}
		}
	}
	return out
}

// The binary as the image builds it (deploy/Dockerfile: -tags production), once.
func buildTrawler(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "trawler")
	cmd := exec.Command("go", "build", "-tags", "production", "-o", bin, "./cmd/trawler")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var metricRE = regexp.MustCompile(`\btrawler_[a-z_]+\b`)

// Every manifest kustomize would apply (and the HPA alternative) is well formed, and
// what it asks of the binary is what the binary does: subcommands, flags, TRAWLER_*
// variables, secret files, probes on served ports, and the metric KEDA scales on.
func TestDeployManifests(t *testing.T) {
	var kust doc
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &kust); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, r := range list(kust["resources"]) {
		files = append(files, str(r))
	}
	all, _ := filepath.Glob("*.yaml")
	for _, f := range all {
		if f != "kustomization.yaml" && f != "hpa.yaml" && !slices.Contains(files, f) {
			t.Errorf("%s is in deploy/ but not in kustomization.yaml's resources", f)
		}
	}
	files = append(files, "hpa.yaml") // the documented alternative: checked as well
	ms := readManifests(t, files)

	// kustomize's images: every container image is the name it rewrites.
	images := map[string]bool{}
	for _, im := range list(kust["images"]) {
		images[str(get(im, "name"))] = true
	}

	byKind := map[string]map[string]doc{}
	for _, m := range ms {
		kind, name := str(m.d["kind"]), str(get(m.d, "metadata", "name"))
		if str(m.d["apiVersion"]) == "" || kind == "" || name == "" {
			t.Errorf("%s: a document without apiVersion, kind or metadata.name: %v", m.file, m.d)
			continue
		}
		if byKind[kind] == nil {
			byKind[kind] = map[string]doc{}
		}
		byKind[kind][name] = m.d
	}
	for _, kind := range []string{"Namespace", "ConfigMap", "Secret", "Deployment", "Service", "ScaledObject", "HorizontalPodAutoscaler"} {
		if len(byKind[kind]) == 0 {
			t.Errorf("no %s", kind)
		}
	}

	bin := buildTrawler(t)
	helps := map[string]string{}
	help := func(sub string) string {
		if h, ok := helps[sub]; ok {
			return h
		}
		out, err := exec.Command(bin, sub, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("trawler %s --help: %v\n%s", sub, err, out)
		}
		helps[sub] = string(out)
		return helps[sub]
	}

	secretKeys := map[string]map[string]bool{}
	for name, s := range byKind["Secret"] {
		secretKeys[name] = map[string]bool{}
		for _, field := range []string{"stringData", "data"} {
			m, _ := get(s, field).(doc)
			for k := range m {
				secretKeys[name][k] = true
			}
		}
	}

	subs := map[string]bool{}
	for name, dep := range byKind["Deployment"] {
		where := "Deployment " + name
		sel, _ := get(dep, "spec", "selector", "matchLabels").(doc)
		labels, _ := get(dep, "spec", "template", "metadata", "labels").(doc)
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s: selector %s=%v does not match the pod labels %v", where, k, v, labels)
			}
		}
		pod := get(dep, "spec", "template", "spec")
		// Secret volumes: mount path → secret.
		secretOf := map[string]string{}
		for _, v := range list(get(pod, "volumes")) {
			if s := str(get(v, "secret", "secretName")); s != "" {
				if secretKeys[s] == nil {
					t.Errorf("%s: volume %s mounts Secret %s, which is not in the manifests", where, str(get(v, "name")), s)
				}
				secretOf[str(get(v, "name"))] = s
			}
		}
		for _, c := range list(get(pod, "containers")) {
			cw := where + " container " + str(get(c, "name"))
			if !images[str(get(c, "image"))] {
				t.Errorf("%s: image %q is not one kustomization.yaml sets", cw, str(get(c, "image")))
			}
			cmd, args := list(get(c, "command")), list(get(c, "args"))
			if len(cmd) != 1 || str(cmd[0]) != "trawler" || len(args) == 0 {
				t.Fatalf("%s: command %v args %v, want [trawler] and a subcommand", cw, cmd, args)
			}
			sub := str(args[0])
			subs[sub] = true
			h := help(sub)
			if !strings.Contains(h, "trawler "+sub) {
				t.Fatalf("%s: %q is no trawler subcommand:\n%s", cw, sub, h)
			}
			flags := map[string]string{}
			for i := 1; i < len(args); i++ {
				a := str(args[i])
				if !strings.HasPrefix(a, "--") {
					continue
				}
				f := strings.TrimPrefix(a, "--")
				if !strings.Contains(h, "--"+f+" ") {
					t.Errorf("%s: trawler %s has no flag --%s", cw, sub, f)
				}
				if i+1 < len(args) && !strings.HasPrefix(str(args[i+1]), "--") {
					flags[f] = str(args[i+1])
				}
			}
			// Environment: from ConfigMaps and env, each a variable the subcommand reads.
			env := map[string]string{}
			for _, ef := range list(get(c, "envFrom")) {
				cm := str(get(ef, "configMapRef", "name"))
				data, ok := get(byKind["ConfigMap"][cm], "data").(doc)
				if !ok {
					t.Errorf("%s: envFrom ConfigMap %q is not in the manifests", cw, cm)
				}
				for k, v := range data {
					env[k] = str(v)
				}
			}
			for _, e := range list(get(c, "env")) {
				env[str(get(e, "name"))] = str(get(e, "value"))
			}
			if len(env) == 0 {
				t.Errorf("%s: no TRAWLER_* settings", cw)
			}
			for k, v := range env {
				if !regexp.MustCompile(`\[` + k + `\]`).MatchString(h) {
					t.Errorf("%s: trawler %s does not read %s (not in its --help)", cw, sub, k)
				}
				// A secret is a file from a mounted Secret, with that key.
				if strings.HasSuffix(k, "_FILE") && !strings.HasSuffix(k, "_CA_FILE") {
					found := false
					for _, vm := range list(get(c, "volumeMounts")) {
						mp := strings.TrimRight(str(get(vm, "mountPath")), "/") + "/"
						if s := secretOf[str(get(vm, "name"))]; s != "" && strings.HasPrefix(v, mp) {
							found = secretKeys[s][strings.TrimPrefix(v, mp)]
						}
					}
					if !found {
						t.Errorf("%s: %s=%s is no key of a Secret mounted in the container", cw, k, v)
					}
				}
			}
			// Ports: what the flags serve on is what the container declares; probes and
			// scrape annotations point at declared ports.
			ports := map[string]int{}
			for _, p := range list(get(c, "ports")) {
				n, _ := strconv.Atoi(str(get(p, "containerPort")))
				ports[str(get(p, "name"))] = n
				ports[str(n)] = n
			}
			served := map[int]bool{}
			for _, f := range []string{"metrics", "listen"} {
				if addr, ok := flags[f]; ok {
					_, port, err := net.SplitHostPort(addr)
					n, _ := strconv.Atoi(port)
					if err != nil || ports[port] == 0 {
						t.Errorf("%s: --%s %s serves on a port the container does not expose (%v)", cw, f, addr, ports)
					}
					served[n] = true
				}
			}
			probes := 0
			for _, pr := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
				p := get(c, pr)
				if p == nil {
					continue
				}
				probes++
				port := str(get(p, "httpGet", "port"))
				if port == "" {
					port = str(get(p, "tcpSocket", "port"))
				}
				if !served[ports[port]] {
					t.Errorf("%s: %s on port %q, which the container does not expose or trawler does not serve", cw, pr, port)
				}
				if path := str(get(p, "httpGet", "path")); path != "" {
					if _, ok := flags["metrics"]; ok && path != "/metrics" {
						t.Errorf("%s: %s on %s; the worker's --metrics serves /metrics only", cw, pr, path)
					}
					if sub == "console" && path != "/healthz" {
						t.Errorf("%s: %s on %s; the console's open health route is /healthz", cw, pr, path)
					}
				}
			}
			if probes < 2 {
				t.Errorf("%s: want readiness and liveness probes", cw)
			}
			for _, r := range []string{"requests", "limits"} {
				if get(c, "resources", r, "cpu") == nil || get(c, "resources", r, "memory") == nil {
					t.Errorf("%s: no cpu and memory %s", cw, r)
				}
			}
			if ann, _ := get(dep, "spec", "template", "metadata", "annotations").(doc); ann["prometheus.io/scrape"] == "true" {
				if n, _ := strconv.Atoi(str(ann["prometheus.io/port"])); !served[n] || str(ann["prometheus.io/path"]) != "/metrics" || flags["metrics"] == "" {
					t.Errorf("%s: scrape annotations %v do not name the --metrics port and /metrics", cw, ann)
				}
			}
		}
	}
	for _, sub := range []string{"worker", "console"} {
		if !subs[sub] {
			t.Errorf("no Deployment runs trawler %s", sub)
		}
	}

	// Services select a Deployment's pods and target a port it names.
	for name, svc := range byKind["Service"] {
		dep := byKind["Deployment"][name]
		sel, _ := get(svc, "spec", "selector").(doc)
		labels, _ := get(dep, "spec", "template", "metadata", "labels").(doc)
		if dep == nil || len(sel) == 0 {
			t.Errorf("Service %s: no Deployment of that name, or no selector", name)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("Service %s: selector %s=%v matches no pod of Deployment %s", name, k, v, name)
			}
		}
		for _, p := range list(get(svc, "spec", "ports")) {
			target := str(get(p, "targetPort"))
			ok := false
			for _, c := range list(get(dep, "spec", "template", "spec", "containers")) {
				for _, cp := range list(get(c, "ports")) {
					ok = ok || str(get(cp, "name")) == target || str(get(cp, "containerPort")) == target
				}
			}
			if !ok {
				t.Errorf("Service %s: targetPort %s is no container port", name, target)
			}
		}
	}

	// Autoscaling: on a metric internal/monitor registers, for the worker Deployment.
	registered := monitorMetrics(t)
	for name, so := range byKind["ScaledObject"] {
		if target := str(get(so, "spec", "scaleTargetRef", "name")); byKind["Deployment"][target] == nil {
			t.Errorf("ScaledObject %s scales %q, no Deployment", name, target)
		}
		if n, _ := strconv.Atoi(str(get(so, "spec", "minReplicaCount"))); n < 1 {
			t.Errorf("ScaledObject %s: minReplicaCount %d; the workers export the backlog, so keep at least 1", name, n)
		}
		triggers := list(get(so, "spec", "triggers"))
		if len(triggers) == 0 {
			t.Errorf("ScaledObject %s: no triggers", name)
		}
		for _, tr := range triggers {
			q := str(get(tr, "metadata", "query"))
			if str(get(tr, "type")) != "prometheus" || str(get(tr, "metadata", "serverAddress")) == "" || str(get(tr, "metadata", "threshold")) == "" {
				t.Errorf("ScaledObject %s: want a prometheus trigger with serverAddress, query and threshold: %v", name, tr)
			}
			checkMetrics(t, "ScaledObject "+name, q, registered, "trawler_desired_workers")
		}
	}
	for name, hpa := range byKind["HorizontalPodAutoscaler"] {
		if target := str(get(hpa, "spec", "scaleTargetRef", "name")); byKind["Deployment"][target] == nil {
			t.Errorf("HPA %s scales %q, no Deployment", name, target)
		}
		for _, m := range list(get(hpa, "spec", "metrics")) {
			checkMetrics(t, "HPA "+name, str(get(m, "external", "metric", "name")), registered, "trawler_desired_workers")
		}
	}
}

func checkMetrics(t *testing.T, where, query string, registered map[string]bool, want string) {
	t.Helper()
	names := metricRE.FindAllString(query, -1)
	if !slices.Contains(names, want) {
		t.Errorf("%s: query %q does not use %s", where, query, want)
	}
	for _, n := range names {
		if !registered[n] {
			t.Errorf("%s: %s is not a metric internal/monitor registers", where, n)
		}
	}
}

// monitorMetrics are the metric names internal/monitor registers (promauto … Name:).
func monitorMetrics(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob("../internal/monitor/*.go")
	names := map[string]bool{}
	re := regexp.MustCompile(`Name:\s*"(trawler_[a-z_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
	}
	if !names["trawler_backlog"] {
		t.Fatalf("internal/monitor registers no trawler_backlog (found %v)", names)
	}
	return names
}
