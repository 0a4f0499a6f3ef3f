package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docPages are the README and every page of docs/, relative to the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, pages...)
}

// allDocs is the README and docs/ as one text, for checks that care what is said, not
// on which page.
func allDocs(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, p := range docPages(t) {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(text)
		b.WriteByte('\n')
	}
	return b.String()
}

var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)

// anchors are the ids GitHub gives a page's headings: lower case, punctuation dropped,
// spaces as dashes, a repeated heading numbered from -1.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			out[id+"-"+strconv.Itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

// prose is a page's lines outside fenced code blocks.
func prose(text string) []string {
	var out []string
	code := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
			continue
		}
		if !code {
			out = append(out, line)
		}
	}
	return out
}

// Every link of the README and of docs/ leads somewhere: a file or folder of the
// repository that exists, and a heading of the page it names. The README stays a front
// page of at most 300 lines.
func TestDocsLinksResolve(t *testing.T) {
	pageAnchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := pageAnchors[path]; ok {
			return a
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		pageAnchors[path] = anchors(string(text))
		return pageAnchors[path]
	}
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if page == "../README.md" {
			if n := strings.Count(string(text), "\n"); n > 300 {
				t.Errorf("README.md has %d lines; keep it a front page of at most 300 and move the rest to docs/", n)
			}
		}
		for _, line := range prose(string(text)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s: link %s: no such file or folder", strings.TrimPrefix(page, "../"), target)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[anchor] {
					t.Errorf("%s: link %s: %s has no heading #%s", strings.TrimPrefix(page, "../"), target, strings.TrimPrefix(file, "../"), anchor)
				}
			}
		}
	}
}
