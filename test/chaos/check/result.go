// Package check judges a chaos run's history against meshgw's invariants (DESIGN.md section
// 14): each checker is a pure function of a history.History and returns a Result.
package check

import (
	"fmt"
	"strings"
)

// Result is one invariant's verdict.
type Result struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Pass returns a holding Result with a detail.
func Pass(format string, args ...any) Result {
	return Result{OK: true, Detail: fmt.Sprintf(format, args...)}
}

// Fail returns a broken Result with a detail.
func Fail(format string, args ...any) Result {
	return Result{OK: false, Detail: fmt.Sprintf(format, args...)}
}

// Skip returns a Result for an invariant that could not be judged, holding, with the reason.
func Skip(reason string) Result { return Result{OK: true, Detail: "not judged: " + reason} }

// examples keeps the first few violations of a checker, for its detail.
type examples struct {
	n     int
	lines []string
}

func (e *examples) add(format string, args ...any) {
	e.n++
	if len(e.lines) < 3 {
		e.lines = append(e.lines, fmt.Sprintf(format, args...))
	}
}

func (e *examples) String() string {
	s := strings.Join(e.lines, "; ")
	if e.n > len(e.lines) {
		s += fmt.Sprintf("; and %d more", e.n-len(e.lines))
	}
	return s
}
