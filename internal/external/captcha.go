package external

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Challenge is a captcha to solve: a question in text, or an image, or both.
type Challenge struct {
	ID       string `json:"id,omitempty"`
	Question string `json:"question,omitempty"`
	Image    []byte `json:"image,omitempty"` // base64 in JSON
}

// Solver answers captchas.
type Solver interface {
	Solve(ctx context.Context, c Challenge) (string, error)
}

// SolverFunc adapts a function into a Solver.
type SolverFunc func(ctx context.Context, c Challenge) (string, error)

// Solve calls f.
func (f SolverFunc) Solve(ctx context.Context, c Challenge) (string, error) { return f(ctx, c) }

// RegisterSolver names a solver for the solver param of external.captcha_solve.
func RegisterSolver(name string, s Solver) {
	registry.Lock()
	defer registry.Unlock()
	registry.solvers[name] = s
}

// SolverFor returns the named solver, or an HTTP solving service for a URL.
func SolverFor(name string) (Solver, error) {
	if strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://") {
		return HTTPSolver(name), nil
	}
	registry.RLock()
	defer registry.RUnlock()
	if s, ok := registry.solvers[name]; ok {
		return s, nil
	}
	names := make([]string, 0, len(registry.solvers))
	for n := range registry.solvers {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("no captcha solver %q%s; registered: %s, or give the URL of a solving service", name, crawl.Suggest(name, names), strings.Join(names, ", "))
}

// HTTPSolver asks a solving service: it posts the Challenge as JSON to url and reads
// {"answer": "..."}.
func HTTPSolver(url string) Solver {
	return SolverFunc(func(ctx context.Context, c Challenge) (string, error) {
		var out struct {
			Answer string `json:"answer"`
		}
		if err := postJSON(ctx, url, c, &out); err != nil {
			return "", fmt.Errorf("solving service: %w", err)
		}
		return out.Answer, nil
	})
}

// ArithSolver is the bundled solver for text captchas that ask for a small sum,
// difference or product: "What is 7 plus 12?", "3 × 4 = ?".
var ArithSolver = SolverFunc(func(ctx context.Context, c Challenge) (string, error) {
	m := arithRE.FindStringSubmatch(strings.ToLower(c.Question))
	if m == nil {
		return "", fmt.Errorf("the arith solver reads questions like \"What is 7 plus 12?\"; got %q", c.Question)
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[3])
	var n int
	switch m[2] {
	case "plus", "+":
		n = a + b
	case "minus", "-":
		n = a - b
	default:
		n = a * b
	}
	return strconv.Itoa(n), nil
})

var arithRE = regexp.MustCompile(`(-?\d+)\s*(plus|minus|times|\+|-|\*|x|×)\s*(-?\d+)`)

// CaptchaSolveTask is the bundled external.captcha_solve: it answers the captcha an
// upstream step handed on (its question, or its image as base64) and hands every
// variable on with the answer added, for the step that logs in.
var CaptchaSolveTask = crawl.TaskFunc(crawl.TaskSpec{
	Name: "external.captcha_solve",
	Doc:  "solve the captcha in the input's variables and hand them on with the answer",
	Params: []crawl.Param{
		{Name: "solver", Type: crawl.String, Default: "arith", Doc: "a registered solver (arith: the bundled one for small sums) or the URL of a solving service"},
		{Name: "question_var", Type: crawl.String, Default: "question", Doc: "input variable holding the captcha's text"},
		{Name: "image_var", Type: crawl.String, Default: "image", Doc: "input variable holding the captcha image, base64"},
		{Name: "answer_var", Type: crawl.String, Default: "answer", Doc: "variable the answer is handed on in"},
	},
	Timeout: 30 * time.Second,
	Retries: 2,
	Check: func(p crawl.Params) []error {
		if _, err := SolverFor(p.String("solver")); err != nil {
			return []error{fmt.Errorf("param `solver`: %w", err)}
		}
		return nil
	},
}, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	s, err := SolverFor(env.Params.String("solver"))
	if err != nil {
		return crawl.Result{}, crawl.Permanent(err)
	}
	c := Challenge{ID: in.Var("captcha_id"), Question: in.Var(env.Params.String("question_var"))}
	if img := in.Var(env.Params.String("image_var")); img != "" {
		c.Image = []byte(img)
	}
	if c.Question == "" && len(c.Image) == 0 {
		return crawl.Result{}, crawl.Permanentf("input %s carries no captcha: expected variable %q or %q from the step that downloads it", in.Describe(), env.Params.String("question_var"), env.Params.String("image_var"))
	}
	answer, err := s.Solve(ctx, c)
	if err != nil {
		return crawl.Result{}, fmt.Errorf("solve captcha %s with %s: %w", c.ID, env.Params.String("solver"), err)
	}
	vars := maps.Clone(in.Vars)
	vars[env.Params.String("answer_var")] = answer
	return crawl.Result{Next: []crawl.Input{{Vars: vars, Parent: in.Parent}}}, nil
})

func init() {
	RegisterSolver("arith", ArithSolver)
	crawl.Register(CaptchaSolveTask)
}
