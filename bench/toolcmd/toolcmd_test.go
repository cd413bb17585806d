package toolcmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	subs := map[string]Subcommand{
		"ok": func(_ context.Context, args []string, stderr io.Writer) (any, error) {
			fs := flag.NewFlagSet("ok", flag.ContinueOnError)
			fs.SetOutput(stderr)
			n := fs.Int("n", 1, "a number")
			if err := Parse(fs, args); err != nil {
				return nil, err
			}
			if *n < 0 {
				return nil, BadFlags{Msg: "--n must be ≥ 0"}
			}
			return map[string]int{"n": *n}, nil
		},
		"fail": func(context.Context, []string, io.Writer) (any, error) { return nil, errors.New("boom") },
	}
	tests := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{nil, 2, "", "usage: tool fail|ok [flags]"},
		{[]string{"nope"}, 2, "", `unknown subcommand "nope"`},
		{[]string{"help"}, 0, "usage: tool fail|ok", ""},
		{[]string{"ok", "-n", "3"}, 0, `{"n":3}`, ""},
		{[]string{"ok", "-h"}, 0, "", "-n int"},
		{[]string{"ok", "-x"}, 2, "", "flag provided but not defined"},
		{[]string{"ok", "extra"}, 2, "", `tool: unexpected argument "extra"`},
		{[]string{"ok", "-n", "-1"}, 2, "", "tool: --n must be ≥ 0"},
		{[]string{"fail"}, 1, "", "tool: boom"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), "tool", subs, tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errOut.String(), tt.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out.String(), errOut.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
}
