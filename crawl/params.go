package crawl

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Params are a step's parameters with the task's declared defaults applied.
type Params map[string]any

// String returns the param as a string ("" when absent).
func (p Params) String(name string) string {
	v, ok := p[name]
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// Int returns the param as an int (0 when absent or not a number).
func (p Params) Int(name string) int {
	n, _ := AsInt(p[name])
	return n
}

// Float returns the param as a float64 (0 when absent or not a number).
func (p Params) Float(name string) float64 {
	switch v := p[name].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return 0
}

// Bool returns the param as a bool.
func (p Params) Bool(name string) bool {
	switch v := p[name].(type) {
	case bool:
		return v
	case string:
		b, _ := strconv.ParseBool(v)
		return b
	}
	return false
}

// Duration returns the param as a duration.
func (p Params) Duration(name string) time.Duration {
	switch v := p[name].(type) {
	case string:
		d, _ := time.ParseDuration(v)
		return d
	case int:
		return time.Duration(v) * time.Second
	}
	return 0
}

// AsInt reads an integer from the forms it takes after YAML, JSON and the command line:
// int, int64, a whole float64, or a numeric string.
func AsInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		if n == float64(int(n)) {
			return int(n), true
		}
	case string:
		i, err := strconv.Atoi(strings.TrimSpace(n))
		return i, err == nil
	}
	return 0, false
}

// checkType reports whether v is acceptable for a param of type t, converting numeric
// strings (from `--set`) to their declared type.
func checkType(t Type, v any) (any, error) {
	switch t {
	case Int:
		if n, ok := AsInt(v); ok {
			return n, nil
		}
		return nil, fmt.Errorf("want an integer, got %v", describeValue(v))
	case Float:
		switch n := v.(type) {
		case int:
			return float64(n), nil
		case float64:
			return n, nil
		case string:
			if f, err := strconv.ParseFloat(n, 64); err == nil {
				return f, nil
			}
		}
		return nil, fmt.Errorf("want a number, got %v", describeValue(v))
	case Bool:
		switch b := v.(type) {
		case bool:
			return b, nil
		case string:
			if x, err := strconv.ParseBool(b); err == nil {
				return x, nil
			}
		}
		return nil, fmt.Errorf("want true or false, got %v", describeValue(v))
	case String, URL:
		switch v.(type) {
		case string, int, float64, bool:
			return fmt.Sprint(v), nil
		}
		return nil, fmt.Errorf("want a string, got %v", describeValue(v))
	case List:
		if _, ok := v.([]any); ok {
			return v, nil
		}
		if s, ok := v.(string); ok {
			return []any{s}, nil
		}
		return nil, fmt.Errorf("want a list, got %v", describeValue(v))
	}
	return v, nil
}

func describeValue(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}
