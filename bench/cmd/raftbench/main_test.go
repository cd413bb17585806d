package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/storage"
)

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bogus"},
		{"cluster"}, // no --dir
		{"commit"},  // no --dir
		{"commit", "--dir", "x", "--writes", "0"},
		{"commit", "--dir", "x", "--stores", "0"},
		{"cluster", "--dir", "x", "--nodes", "0"},
		{"fill", "--node-id", "n1"},  // no --state-dir
		{"fill", "--state-dir", "x"}, // no --node-id
		{"fill", "--state-dir", "x", "--node-id", "n1", "extra"},
	} {
		if code := run(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestCluster times a few writes through a real 3-node cluster on loopback.
func TestCluster(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"cluster", "--nodes", "3", "--writes", "20", "--dir", t.TempDir()}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, tailOf(&errOut))
	}
	var res ClusterResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Nodes != 3 || res.Writes != 20 || res.P50Ms <= 0 || res.P99Ms < res.P50Ms || res.MaxMs < res.P99Ms || res.WritesPerSec <= 0 {
		t.Errorf("result %+v", res)
	}
}

// TestCommit times appends to one store on disk, and to three at once.
func TestCommit(t *testing.T) {
	for _, stores := range []int{1, 3} {
		var out bytes.Buffer
		args := []string{"commit", "--writes", "20", "--stores", fmt.Sprint(stores), "--dir", t.TempDir()}
		if code := run(context.Background(), args, &out, io.Discard); code != 0 {
			t.Fatalf("%d stores: exit %d", stores, code)
		}
		var res CommitResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if res.Nodes != stores || res.Writes != 20 || res.P50Ms <= 0 || res.P99Ms < res.P50Ms || res.MaxMs < res.P99Ms {
			t.Errorf("%d stores: result %+v", stores, res)
		}
	}
}

// TestClusterAck times fleet-acknowledged writes through a real 3-node cluster.
func TestClusterAck(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"cluster", "--nodes", "3", "--writes", "20", "--ack", "--dir", t.TempDir()}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, tailOf(&errOut))
	}
	var res ClusterResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Acked || res.Writes != 20 || res.P50Ms <= 0 || res.P99Ms < res.P50Ms {
		t.Errorf("result %+v", res)
	}
}

// TestFill writes records that a node started on the same folder restores, owned elsewhere.
func TestFill(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"fill", "--state-dir", dir, "--node-id", "gw1", "--workers", "50", "--owner", "gw9"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var res FillResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Workers != 50 {
		t.Fatalf("result %+v, %v", res, err)
	}
	nd, err := storage.PrepareNodeDir(dir, "gw1", nil)
	if err != nil {
		t.Fatal(err)
	}
	bind, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	n, err := consensus.Start(consensus.Config{NodeID: "gw1", BindAddr: bind, StateDir: nd.Path, Logger: quiet(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	recs := n.Workers()
	if len(recs) != 50 {
		t.Fatalf("restored %d records, want 50", len(recs))
	}
	for _, r := range recs {
		if r.Owner != "gw9" || len(r.Spec.Models) != 1 {
			t.Fatalf("record %+v", r)
		}
	}
	// A second fill on the same folder would double-count: it is refused.
	if code := run(context.Background(), []string{"fill", "--state-dir", dir, "--node-id", "gw1", "--workers", "50"}, io.Discard, io.Discard); code != 1 {
		t.Errorf("a second fill exited %d, want 1", code)
	}
}

// tailOf is the end of what a failed run wrote to its standard error: its error line, after the
// warnings of the nodes it ran.
func tailOf(b *bytes.Buffer) string {
	const keep = 2000
	if s := b.String(); len(s) > keep {
		return "…" + s[len(s)-keep:]
	}
	return b.String()
}
