// Package scaffold writes the starting points of `trawler new`: a site package on the
// task SDK with recorded pages and a test, and a config-driven chain inferred from a
// live list page.
package scaffold

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"
)

//go:embed templates
var templates embed.FS

// DemoBaseURL is the chain's base_url when none is given: the running dev stack's demo
// site, else its usual address.
const DemoBaseURL = "${demo_site:-http://127.0.0.1:8089}"

// SiteOptions say where `trawler new site` writes.
type SiteOptions struct {
	Name        string // the package name and the tasks' site prefix
	Dir         string // parent directory of the package (sites)
	ExamplesDir string // where the chain file goes (examples)
	BaseURL     string // the site's root; "" keeps the demo site's
	Force       bool   // overwrite an existing package directory and chain file
	// Module, when set, makes Dir a Go module of its own with this path: go.mod, a main.go
	// calling cli.Main with the site's tasks, the package Dir/Name, chain.yaml and a
	// Makefile. ExamplesDir is not used then.
	Module string
	// Replace is a local checkout of Trawler the module's go.mod points at (and whose
	// go.sum it starts from), until Trawler is published; "" requires it by version.
	Replace string
}

// SiteResult is what was written.
type SiteResult struct {
	Package    string   `json:"package"`     // its directory
	ImportPath string   `json:"import_path"` // "" when no go.mod was found above it
	Files      []string `json:"files"`
	Chain      string   `json:"chain"`
	Tasks      []string `json:"tasks"`
	ImportLine string   `json:"import_line"`      // the blank import that registers the tasks
	ImportInto string   `json:"import_into"`      // the file that should carry it
	Module     string   `json:"module,omitempty"` // the written module's directory, with --module
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// modulePathRE is a plausible module path: slash-separated elements of letters, digits
// and . _ ~ -, the first starting with a letter or digit.
var modulePathRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._~-]*(/[a-zA-Z0-9._~-]+)*$`)

// CheckName refuses a name that cannot be a lowercase Go package and site prefix.
func CheckName(name string) error {
	switch {
	case !nameRE.MatchString(name):
		return fmt.Errorf("site name %q: use a lowercase Go identifier: a letter, then letters, digits or _ (e.g. news or acme_shop)", name)
	case token.IsKeyword(name):
		return fmt.Errorf("site name %q is a Go keyword; pick another", name)
	case name == "main" || name == "generic" || strings.HasSuffix(name, "_test"):
		return fmt.Errorf("site name %q is reserved; pick another", name)
	}
	return nil
}

// WriteSite writes the package Dir/Name (a feed and a detail task, recorded pages under
// testdata/, a test running both tasks on them) and ExamplesDir/Name.yaml.
func WriteSite(o SiteOptions) (SiteResult, error) {
	if err := CheckName(o.Name); err != nil {
		return SiteResult{}, err
	}
	if o.Module != "" {
		return writeModule(o)
	}
	pkgDir, err := filepath.Abs(filepath.Join(o.Dir, o.Name))
	if err != nil {
		return SiteResult{}, err
	}
	examples, err := filepath.Abs(o.ExamplesDir)
	if err != nil {
		return SiteResult{}, err
	}
	return writeSite(o, pkgDir, filepath.Join(examples, o.Name+".yaml"), nil)
}

// writeSite writes the package pkgDir and the chain file; extra fills the templates'
// module fields.
func writeSite(o SiteOptions, pkgDir, chainFile string, extra map[string]string) (SiteResult, error) {
	if !o.Force {
		if _, err := os.Stat(pkgDir); err == nil {
			return SiteResult{}, fmt.Errorf("%s already exists; pick another name, or --force to overwrite its generated files", pkgDir)
		}
		if _, err := os.Stat(chainFile); err == nil {
			return SiteResult{}, fmt.Errorf("%s already exists; pick another name, or --force to overwrite it", chainFile)
		}
	}
	chainRel, err := filepath.Rel(pkgDir, chainFile)
	if err != nil {
		chainRel = chainFile
	}
	res := SiteResult{Package: pkgDir, Chain: chainFile, Tasks: []string{o.Name + ".feed", o.Name + ".detail"}}
	root, module := moduleOf(pkgDir)
	if o.Module != "" { // the module being written, whose go.mod comes after the package
		root, module = filepath.Dir(pkgDir), o.Module
	}
	shown := func(p string) string { // paths as the user sees them: module-relative when possible
		if root != "" {
			if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
				return filepath.ToSlash(r)
			}
		}
		return p
	}
	if module != "" {
		if rel, err := filepath.Rel(root, pkgDir); err == nil && !strings.HasPrefix(rel, "..") {
			res.ImportPath = module + "/" + filepath.ToSlash(rel)
		}
		if res.ImportPath != "" && o.Module == "" { // in Trawler's tree: a blank import registers it
			res.ImportLine = fmt.Sprintf("_ %q", res.ImportPath)
			res.ImportInto = filepath.Join(root, "cmd", "trawler", "main.go")
		}
	}
	base := o.BaseURL
	chainBase := DemoBaseURL
	if base == "" {
		base = "http://127.0.0.1:8089"
	} else {
		base = strings.TrimRight(base, "/")
		chainBase = base
	}
	data := map[string]string{
		"Name": o.Name, "BaseURL": base, "ChainBaseURL": chainBase, "Site": base,
		"ChainRel": filepath.ToSlash(chainRel), "ChainFile": shown(chainFile), "SiteDir": shown(pkgDir),
	}
	maps.Copy(data, extra)
	render := func(name string) ([]byte, error) {
		return renderTemplate(name, data)
	}
	write := func(path string, b []byte) error {
		if err := writeFile(path, b); err != nil {
			return err
		}
		res.Files = append(res.Files, path)
		return nil
	}
	for _, f := range [][2]string{{"site.go.tmpl", o.Name + ".go"}, {"site_test.go.tmpl", o.Name + "_test.go"}} {
		tmpl, out := f[0], f[1]
		b, err := render(tmpl)
		if err != nil {
			return res, fmt.Errorf("render %s: %w", tmpl, err)
		}
		if err := write(filepath.Join(pkgDir, out), b); err != nil {
			return res, err
		}
	}
	pages, _ := fs.Glob(templates, "templates/testdata/*.html")
	for _, p := range pages {
		b, _ := templates.ReadFile(p)
		if err := write(filepath.Join(pkgDir, "testdata", filepath.Base(p)), b); err != nil {
			return res, err
		}
	}
	b, err := render("chain.yaml.tmpl")
	if err != nil {
		return res, err
	}
	if err := write(chainFile, b); err != nil {
		return res, err
	}
	return res, nil
}

// renderTemplate fills the named template with data; Go source comes out gofmt'ed.
func renderTemplate(name string, data map[string]string) ([]byte, error) {
	src, err := templates.ReadFile("templates/" + name)
	if err != nil {
		return nil, err
	}
	t, err := template.New(name).Delims("[[", "]]").Parse(string(src))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, err
	}
	if strings.HasSuffix(name, ".go.tmpl") {
		return format.Source(b.Bytes())
	}
	return b.Bytes(), nil
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// writeModule writes the site as a Go module of its own in o.Dir: the package o.Name, its
// chain.yaml, go.mod requiring Trawler, main.go and a Makefile.
func writeModule(o SiteOptions) (SiteResult, error) {
	if !modulePathRE.MatchString(o.Module) {
		return SiteResult{}, fmt.Errorf("--module %q: not a module path; use an import path such as github.com/acme/crawlers", o.Module)
	}
	root, err := filepath.Abs(o.Dir)
	if err != nil {
		return SiteResult{}, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil && !o.Force {
		return SiteResult{}, fmt.Errorf("%s already exists; pick another --dir, or --force to overwrite the generated files", filepath.Join(root, "go.mod"))
	}
	data := map[string]string{"Name": o.Name, "Module": o.Module, "GoVersion": goVersion(""), "TrawlerVersion": trawlerVersion()}
	if o.Replace != "" {
		checkout, err := filepath.Abs(o.Replace)
		if err != nil {
			return SiteResult{}, err
		}
		if _, mod := moduleOf(checkout); mod != "github.com/trawlerhq/trawler" || !isFile(filepath.Join(checkout, "go.mod")) {
			return SiteResult{}, fmt.Errorf("--replace %s: no checkout of github.com/trawlerhq/trawler there (its go.mod names the module); give the directory of Trawler's go.mod", o.Replace)
		}
		data["Replace"], data["GoVersion"] = checkout, goVersion(checkout)
		data["Requires"], data["Replaces"] = requirements(checkout)
	}
	res, err := writeSite(o, filepath.Join(root, o.Name), filepath.Join(root, "chain.yaml"), data)
	if err != nil {
		return res, err
	}
	res.Module = root
	for _, f := range [][2]string{{"go.mod.tmpl", "go.mod"}, {"main.go.tmpl", "main.go"}, {"Makefile.tmpl", "Makefile"}} {
		b, err := renderTemplate(f[0], data)
		if err != nil {
			return res, fmt.Errorf("render %s: %w", f[0], err)
		}
		if err := writeFile(filepath.Join(root, f[1]), b); err != nil {
			return res, err
		}
		res.Files = append(res.Files, filepath.Join(root, f[1]))
	}
	if o.Replace != "" {
		// The checkout's go.sum holds the sums of every module Trawler needs, so the new
		// module builds without a round of `go mod tidy` (and offline).
		sum, err := os.ReadFile(filepath.Join(data["Replace"], "go.sum"))
		if err != nil {
			return res, err
		}
		if err := writeFile(filepath.Join(root, "go.sum"), sum); err != nil {
			return res, err
		}
		res.Files = append(res.Files, filepath.Join(root, "go.sum"))
	}
	return res, nil
}

// goVersion is the go line of the checkout's go.mod, else this binary's Go version: the
// least a module built on Trawler may declare.
func goVersion(checkout string) string {
	if b, err := os.ReadFile(filepath.Join(checkout, "go.mod")); checkout != "" && err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "go" {
				return f[1]
			}
		}
	}
	return strings.TrimPrefix(runtime.Version(), "go")
}

// requirements are the checkout's requirements, one "path version // indirect" a line,
// and its replacements with local paths made absolute: the new module then selects
// exactly the versions Trawler is tested with, and builds without a round of
// `go mod tidy`. (A dependency's replacements do not apply to the module that needs it.)
func requirements(checkout string) (requires, replaces string) {
	b, err := os.ReadFile(filepath.Join(checkout, "go.mod"))
	if err != nil {
		return "", ""
	}
	var req, rep []string
	block := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "//"); i >= 0 {
			f = f[:i]
		}
		switch {
		case len(f) == 2 && f[1] == "(":
			block = f[0]
		case len(f) == 1 && f[0] == ")":
			block = ""
		case block == "require" && len(f) == 2:
			req = append(req, f[0]+" "+f[1]+" // indirect")
		case len(f) == 3 && f[0] == "require":
			req = append(req, f[1]+" "+f[2]+" // indirect")
		case block == "replace" && slices.Contains(f, "=>"):
			rep = append(rep, replacement(checkout, f))
		case len(f) > 1 && f[0] == "replace" && slices.Contains(f, "=>"):
			rep = append(rep, replacement(checkout, f[1:]))
		}
	}
	return strings.Join(req, "\n\t"), strings.Join(rep, "\n\t")
}

// replacement is one replace line of the checkout's go.mod, its local target absolute.
func replacement(checkout string, f []string) string {
	target := f[len(f)-1]
	if strings.HasPrefix(target, "./") || strings.HasPrefix(target, "../") {
		f[len(f)-1] = filepath.Join(checkout, target)
	}
	return strings.Join(f, " ")
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// moduleOf finds the go.mod above dir: its directory and module path.
func moduleOf(dir string) (root, module string) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
					return d, strings.Trim(f[1], `"`)
				}
			}
			return d, ""
		}
		if filepath.Dir(d) == d {
			return "", ""
		}
	}
}

// trawlerVersion is the version of github.com/trawlerhq/trawler this binary was built
// from, when it was built from a published one (a site's binary lists it among its
// dependencies); "" for a checkout's build, whose go.mod then requires nothing until
// `go get github.com/trawlerhq/trawler@latest` (a version that does not exist would make
// that fail).
func trawlerVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	mods := append([]*debug.Module{&info.Main}, info.Deps...)
	for _, m := range mods {
		if m.Path == "github.com/trawlerhq/trawler" && strings.HasPrefix(m.Version, "v") { // not "(devel)"
			return m.Version
		}
	}
	return ""
}
