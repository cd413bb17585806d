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
	ps := &procs{log: log, dir: t.TempDir()}
	defer ps.stopAll(time.Second)
	return runMesh(ctx, ps, &Options{Log: log}, &MeshOptions{Bin: bin, Peers: 7})
}

func TestRunMesh(t *testing.T) {
	bin, argsFile := fakeMeshbench(t, `case "$*" in
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
	args, _ := os.ReadFile(argsFile)
	for _, want := range []string{"converge --peers 7 --profile lan --runs 3", "converge --peers 7 --profile local --runs 3"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("meshbench ran with %q, want %q among them", args, want)
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
