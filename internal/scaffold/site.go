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
	"os"
	"path/filepath"
	"regexp"
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
}

// SiteResult is what was written.
type SiteResult struct {
	Package    string   `json:"package"`     // its directory
	ImportPath string   `json:"import_path"` // "" when no go.mod was found above it
	Files      []string `json:"files"`
	Chain      string   `json:"chain"`
	Tasks      []string `json:"tasks"`
	ImportLine string   `json:"import_line"` // the blank import that registers the tasks
	ImportInto string   `json:"import_into"` // the file that should carry it
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

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
	pkgDir, err := filepath.Abs(filepath.Join(o.Dir, o.Name))
	if err != nil {
		return SiteResult{}, err
	}
	examples, err := filepath.Abs(o.ExamplesDir)
	if err != nil {
		return SiteResult{}, err
	}
	chainFile := filepath.Join(examples, o.Name+".yaml")
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
	render := func(name string) ([]byte, error) {
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
	write := func(path string, b []byte) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
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
