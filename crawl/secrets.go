package crawl

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// SecretRef says where the workers read one of a chain's named secrets: a file on
// the worker or a variable of its environment. Only the reference travels in a plan;
// the value is read where it is typed.
type SecretRef struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
	line int
}

var (
	secretRefKeys = []string{"file", "env"}
	// fillSources are the ways a fill's value may be given other than written out.
	fillSources = []string{"secret", "param", "secret_file"}
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// secrets reads the chain's `secrets: {NAME: {file: PATH} | {env: VAR}}`.
func (l *loader) secrets(v *yaml.Node) map[string]SecretRef {
	if v.Kind != yaml.MappingNode {
		l.add(v.Line, "secrets must be a mapping of names to where the workers read them, e.g. secrets: {shop_password: {file: /run/secrets/shop-password}}, not a %s", kindName(v))
		return nil
	}
	out := map[string]SecretRef{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		name, n := v.Content[i].Value, v.Content[i+1]
		where := "secrets." + name
		ref := SecretRef{line: v.Content[i].Line}
		if !nameRE.MatchString(name) {
			l.add(ref.line, "%s: a secret's name uses lowercase letters, digits, - and _ (it is what fill: {SELECTOR: {secret: NAME}} names)", where)
		}
		l.fields(n, where, secretRefKeys, func(key string, v *yaml.Node) {
			switch key {
			case "file":
				ref.File = l.str(v, where+".file")
			case "env":
				ref.Env = l.str(v, where+".env")
			}
		})
		switch {
		case n.Kind != yaml.MappingNode:
		case (ref.File == "") == (ref.Env == ""):
			l.add(n.Line, "%s takes one of {file: /absolute/path} (a file on every worker holding the secret, one line) or {env: VARIABLE} (a variable of the workers' environment)", where)
		case ref.File != "" && !filepath.IsAbs(ref.File):
			l.add(n.Line, "%s.file %q: write the absolute path of the file on the workers, e.g. /run/secrets/%s", where, ref.File, name)
		case ref.Env != "" && !envNameRE.MatchString(ref.Env):
			l.add(n.Line, "%s.env %q is not a variable name; write e.g. env: SHOP_PASSWORD", where, ref.Env)
		}
		out[name] = ref
	}
	return out
}

// resolveFills gives every fill of a step's actions that names a secret or a param
// what it stands for: the secret's file or variable (read on the worker), or the
// param's value. A name the chain does not have is an error on the fill's line.
func (l *loader) resolveFills(c *Chain, s Step, where string) {
	if s.Render == nil {
		return
	}
	declared := slices.Sorted(maps.Keys(c.Secrets))
	var walk func(acts []Action, path string)
	walk = func(acts []Action, path string) {
		for i := range acts {
			a := &acts[i]
			p := fmt.Sprintf("%s[%d]", path, i)
			walk(a.Do, p+".repeat.do")
			if a.Kind != ActionFill {
				continue
			}
			switch {
			case a.Secret != "":
				ref, ok := c.Secrets[a.Secret]
				if !ok {
					fix := fmt.Sprintf("declare it at the top of the chain file: secrets: {%s: {file: /run/secrets/%s}} (or {env: VARIABLE})", a.Secret, a.Secret)
					if len(declared) > 0 {
						fix = "declared: " + strings.Join(declared, ", ") + "; or " + fix
					}
					l.add(a.line, "%s: %s fill %q: no secret %q%s; %s", where, p, a.Selector, a.Secret, Suggest(a.Secret, declared), fix)
					continue
				}
				a.SecretFile, a.SecretEnv = ref.File, ref.Env
			case a.Param != "":
				v, ok := s.Params[a.Param]
				if !ok {
					v, ok = c.Defaults.Params[a.Param]
				}
				switch v.(type) {
				case string, int, float64, bool:
					a.Value = fmt.Sprint(v)
				default:
					if !ok {
						names := slices.Sorted(maps.Keys(s.Params))
						l.add(a.line, "%s: %s fill %q: the step has no param %q%s; its params: %s", where, p, a.Selector, a.Param, Suggest(a.Param, names), strings.Join(names, ", "))
					} else {
						l.add(a.line, "%s: %s fill %q: param %q is a %T, not one value to type", where, p, a.Selector, a.Param, v)
					}
				}
			}
		}
	}
	walk(s.Render.Actions, "render.actions")
}
