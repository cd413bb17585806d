package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bogus"},
		{"converge", "--peers", "1"},
		{"converge", "--runs", "0"},
		{"converge", "--profile", "fast"},
		{"converge", "--timeout", "0s"},
		{"converge", "--log-level", "loud"},
		{"converge", "--nope"},
		{"converge", "extra"},
		{"bulletins", "--peers", "1"},
		{"bulletins", "--trials", "0"},
		{"bulletins", "--workers", "0"},
		{"bulletins", "--bound", "0s"},
		{"bulletins", "--profile", "fast"},
		{"bulletin-bytes", "--workers", "0"},
		{"bulletin-bytes", "--window", "0s"},
		{"bulletin-bytes", "--settle", "-1s"},
		{"bulletin-bytes", "--churn", "0"},
	} {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestConverge runs the benchmark with 5 peers and checks what it prints.
func TestConverge(t *testing.T) {
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"converge", "--peers", "5", "--profile", "local", "--runs", "2", "--timeout", "30s"}, &out, &errs)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var res ConvergeResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if res.Peers != 5 || res.Profile != "local" || len(res.RunsS) != 2 || res.MedianS <= 0 || res.MaxS < res.MedianS {
		t.Errorf("result %+v", res)
	}
}

// TestConvergeTimeout: a run that cannot finish in time fails with exit 1.
func TestConvergeTimeout(t *testing.T) {
	if code := run(context.Background(), []string{"converge", "--peers", "20", "--profile", "wan", "--runs", "1", "--timeout", "1ms"}, io.Discard, io.Discard); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
