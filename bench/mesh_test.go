package bench

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeMeshbench writes a script that stands in for bench-meshbench: it records its arguments
// and runs body.
func fakeMeshbench(t *testing.T, body string) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	bin, argsFile = filepath.Join(dir, "meshbench"), filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >> " + argsFile + "\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func meshRun(t *testing.T, ctx context.Context, bin string) any {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ps := newProcs(log, t.TempDir())
	defer ps.Stop(time.Second)
	return runMesh(ctx, ps, &Options{Log: log}, &MeshOptions{Bin: bin, Peers: 7})
}

func TestRunMesh(t *testing.T) {
	bin, argsFile := fakeMeshbench(t, `case "$*" in
bulletins*"--peers 3 "*) echo '{"peers":3,"profile":"lan","workers":10,"trials":50,"pairs":100,"p50_ms":30.5,"p99_ms":50.25,"max_ms":51,"lost":0,"bound_ms":5000,"slowest":[{"trial":4,"peer":"gw-002","ms":51}]}' ;;
bulletins*) echo '{"peers":100,"profile":"lan","workers":10,"trials":50,"pairs":4950,"p50_ms":80,"p99_ms":5000,"max_ms":5000,"lost":60,"bound_ms":5000,"slowest":[{"trial":9,"peer":"gw-042","ms":-1}]}' ;;
bulletin-bytes*) echo '{"peers":3,"profile":"lan","workers":10000,"window_s":30,"steady":{"owner_bytes_per_s":61000,"peer_bytes_per_s":130},"churn":{"owner_bytes_per_s":78000,"peer_bytes_per_s":16800,"changes":3000},"churn_per_s":100}' ;;
*lan*) echo '{"peers":7,"profile":"lan","runs_s":[1.5,1.25,1.75],"median_s":1.5,"max_s":1.75}' ;;
*) echo '{"peers":7,"profile":"local","runs_s":[0.5,0.25,0.75],"median_s":0.5,"max_s":0.75}' ;;
esac`)
	res, ok := meshRun(t, context.Background(), bin).(MeshResult)
	if !ok {
		t.Fatalf("result %#v", meshRun(t, context.Background(), bin))
	}
	if res.Status != "measured" || res.LAN == nil || res.Local == nil {
		t.Fatalf("result %+v", res)
	}
	// No meshgw binary here: the failover part is not measured, the convergence stays.
	if nm, ok := res.Failover.(NotMeasured); !ok || !strings.HasPrefix(nm.Reason, "failover: ") {
		t.Errorf("failover %+v, want not measured with its reason", res.Failover)
	}
	if res.LAN.Profile != "lan" || res.LAN.MaxS != 1.75 || len(res.LAN.RunsS) != 3 || res.Local.MedianS != 0.5 || res.Local.What == "" {
		t.Errorf("lan %+v local %+v", res.LAN, res.Local)
	}
	runs, ok := res.BulletinPropagation.([]BulletinPropagation)
	if !ok || len(runs) != 2 || runs[0].Peers != 3 || runs[0].P99Ms != 50.25 || runs[1].Lost != 60 || runs[1].Slowest[0].Peer != "gw-042" ||
		runs[0].What == "" {
		t.Errorf("bulletin propagation %+v", res.BulletinPropagation)
	}
	if b, ok := res.BulletinBytes.(BulletinBytes); !ok || b.Workers != 10000 || b.Steady.OwnerBytesPerS != 61000 ||
		b.Churn.PeerBytesPerS != 16800 || b.Churn.Changes != 3000 || b.What == "" {
		t.Errorf("bulletin bytes %+v", res.BulletinBytes)
	}
	args, _ := os.ReadFile(argsFile)
	for _, want := range []string{"converge --peers 7 --profile lan --runs 3", "converge --peers 7 --profile local --runs 3",
		"bulletins --peers 3 --profile lan --trials 50", "bulletins --peers 100 --profile lan --trials 50",
		"bulletin-bytes --peers 3 --profile lan --workers 10000 --window 30s --settle 15s"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("meshbench ran with %q, want %q among them", args, want)
		}
	}
}

// TestRunMeshBulletinsFail: a failed bulletin run leaves only its part not measured.
func TestRunMeshBulletinsFail(t *testing.T) {
	bin, _ := fakeMeshbench(t, `case "$*" in
bulletin*) echo 'meshbench: trial 1: boom' >&2; exit 1 ;;
*) echo '{"peers":7,"profile":"lan","runs_s":[1.5],"median_s":1.5,"max_s":1.5}' ;;
esac`)
	res, ok := meshRun(t, context.Background(), bin).(MeshResult)
	if !ok || res.LAN == nil {
		t.Fatalf("result %+v", res)
	}
	for part, v := range map[string]any{"bulletin propagation at 3 peers: ": res.BulletinPropagation, "bulletin bytes: ": res.BulletinBytes} {
		if nm, ok := v.(NotMeasured); !ok || !strings.HasPrefix(nm.Reason, part) || !strings.Contains(nm.Reason, "failed") {
			t.Errorf("%s%+v, want not measured with its reason", part, v)
		}
	}
}

func TestRunMeshNotMeasured(t *testing.T) {
	tests := []struct {
		name, body string
		ctx        func() context.Context
		want       string
	}{
		{"exit 1", "echo 'meshbench: run 1: no convergence' >&2; exit 1", context.Background, "failed"},
		{"not JSON", "echo hello", context.Background, "printed"},
		{"cancelled", "exec sleep 30", func() context.Context {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			t.Cleanup(cancel)
			return ctx
		}, "deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, _ := fakeMeshbench(t, tt.body)
			nm, ok := meshRun(t, tt.ctx(), bin).(NotMeasured)
			if !ok || !strings.Contains(nm.Reason, tt.want) || !strings.Contains(nm.Reason, "lan profile") {
				t.Errorf("result %+v, want not measured because %q", nm, tt.want)
			}
		})
	}
}
