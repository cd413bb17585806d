package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSortByAColumnNotShown: --sort takes every column a table has with -o wide, as its help
// lists them, and orders the rows by it without -o wide too.
func TestSortByAColumnNotShown(t *testing.T) {
	tests := []struct {
		name   string
		answer string // "METHOD path" answered with ownersAnswer for /mesh/owners, else the fake's
		args   []string
		want   []string // the first cell of each row, in order
	}{
		{"workers by epoch", "", []string{"workers", "list", "--sort", "epoch"}, []string{"127.0.0.1:8013", "10.0.0.9:9000"}},
		{"workers by url", "", []string{"workers", "list", "--sort", "url"}, []string{"10.0.0.9:9000", "127.0.0.1:8013"}},
		{"workers by last error", "", []string{"workers", "list", "--sort", "last_error"}, []string{"127.0.0.1:8013", "10.0.0.9:9000"}},
		{"peers by lag", "", []string{"peers", "--sort", "lag"}, []string{"gw-3", "gw-1*", "gw-2"}},
		{"owners by origin", "GET /mesh/owners", []string{"owners", "--sort", "origin"}, []string{"w-3f1c0a9b2d44", "w-9e8d7c6b5a41", "w-00aa11bb22cc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFake(t)
			if tt.answer != "" {
				f.answers[tt.answer] = canned{200, ownersAnswer}
			}
			code, stdout, stderr := runCLI(t, srv.URL, nil, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			var got []string
			for _, l := range lines[1 : len(lines)-1] { // no header, no summary
				got = append(got, strings.Fields(l)[0])
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rows (-want +got):\n%s\n%s", diff, stdout)
			}
			if strings.Contains(lines[0], strings.ToUpper(tt.args[len(tt.args)-1])) {
				t.Errorf("the table shows the column without -o wide:\n%s", stdout)
			}
		})
	}
}
