package consensus

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/test/testkit"
)

func TestConfigRefusals(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    string
		wantErr error
	}{
		{"no node id", Config{Ephemeral: true}, "NodeID is required", nil},
		{"negative bootstrap expect", Config{NodeID: "n1", Ephemeral: true, BootstrapExpect: -1}, "--bootstrap-expect", nil},
		{"no state dir", Config{NodeID: "n1"}, "StateDir is required", nil},
		{"bad advertise", Config{NodeID: "n1", Ephemeral: true, BindAddr: "127.0.0.1:0", AdvertiseAddr: "0.0.0.0:1"}, "advertise", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = testkit.Quiet()
			n, err := Start(tt.cfg)
			if err == nil {
				_ = n.Shutdown()
				t.Fatal("Start accepted the config")
			}
			if !strings.Contains(err.Error(), tt.want) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("err = %v, want %q / %v", err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestDurableRestart runs a node on the real bbolt stores and TCP transport, writes records and
// flags, restarts it on the same folder (on another port) and checks that it did not bootstrap
// again and that every record and flag came back.
func TestDurableRestart(t *testing.T) {
	dir, err := storage.PrepareNodeDir(t.TempDir(), "n1", testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := Config{NodeID: "n1", BindAddr: "127.0.0.1:0", StateDir: dir.Path, Registerer: reg}
	n := startNode(t, cfg)
	if !n.bootstrapped {
		t.Fatal("a new state dir did not bootstrap")
	}
	waitReady(t, n)
	ctx := context.Background()
	a, b, c := spec(t, 8001), spec(t, 8002), spec(t, 8003)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, cmd := range []fsm.Command{
		fsm.Register{Spec: a, Owner: "n1", At: now},
		fsm.Register{Spec: b, Owner: "n1", At: now},
		fsm.Register{Spec: c, Owner: "n1", At: now},
		fsm.SetFlags{ID: a.ID(), Flags: fsm.FlagChange{Disabled: ptr(true), Reason: "maint", By: "ops", At: now, IsDead: ptr(true)}},
		fsm.Transfer{ID: b.ID(), To: "n2"},
		fsm.Remove{ID: c.ID()},
	} {
		if _, err := n.Apply(ctx, cmd); err != nil {
			t.Fatalf("%T: %v", cmd, err)
		}
	}
	want, cluster, applied, oldAddr := n.Workers(), n.ClusterID(), n.AppliedIndex(), n.Address()
	if len(want) != 2 || !want[0].Disabled && !want[1].Disabled {
		t.Fatalf("before restart: %+v", want)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir.Path, storage.RaftDBName)); err != nil {
		t.Fatalf("no raft.db in the node folder: %v", err)
	}

	n = startNode(t, cfg)
	if n.bootstrapped {
		t.Fatal("the restart bootstrapped again")
	}
	testkit.For(t, "the log to replay", func() bool { return n.AppliedIndex() >= applied })
	if diff := cmp.Diff(want, n.Workers()); diff != "" {
		t.Fatalf("records after restart (-want +got):\n%s", diff)
	}
	if n.ClusterID() != cluster {
		t.Fatalf("cluster id %q after restart, want %q", n.ClusterID(), cluster)
	}
	// The port changed; the node's own entry in the configuration follows it.
	testkit.For(t, "the new address in the configuration", func() bool {
		info, err := n.Info()
		return err == nil && len(info.Servers) == 1 && info.Servers[0].Address == n.Address()
	})
	if n.Address() == oldAddr {
		t.Logf("the restart got the same port %s; the address update went untested", oldAddr)
	}
	res, err := n.Apply(ctx, fsm.Register{Spec: a, Owner: "n1", At: now.Add(time.Hour)})
	if err != nil || res.Outcome != fsm.Unchanged || !res.Record.Disabled || !res.Record.IsDead {
		t.Fatalf("re-registering after restart: %+v, %v; want unchanged with its flags", res, err)
	}
}

func TestEphemeral(t *testing.T) {
	var logs logBuffer
	_, trans := raft.NewInmemTransport("")
	n := startNode(t, Config{NodeID: "n1", Ephemeral: true, Transport: trans, Logger: logs.Logger(slog.LevelInfo)})
	waitReady(t, n)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "ephemeral") {
		t.Fatalf("no warning about ephemeral mode in:\n%s", logs.String())
	}
	res, err := n.Apply(context.Background(), fsm.Register{Spec: spec(t, 8001), Owner: "n1"})
	if err != nil || res.Outcome != fsm.Created || res.Index == 0 {
		t.Fatalf("register: %+v, %v", res, err)
	}
	if strings.Contains(logs.String(), "sk-secret") {
		t.Fatal("an api key reached the log")
	}
}

func TestApplyErrors(t *testing.T) {
	_, trans := raft.NewInmemTransport("")
	n := startNode(t, Config{NodeID: "n1", Ephemeral: true, Transport: trans})
	waitReady(t, n)
	a := spec(t, 8001)
	if _, err := n.Apply(context.Background(), fsm.Register{Spec: a, Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	other := a
	other.Priority = ptr(7)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bad := a
	bad.Labels = map[string]string{"k": "\xff"} // not UTF-8: does not encode

	tests := []struct {
		name    string
		ctx     context.Context
		cmd     fsm.Command
		wantErr error
	}{
		{"conflict", context.Background(), fsm.Register{Spec: other, Owner: "n1"}, fsm.ErrConflict},
		{"not found", context.Background(), fsm.Remove{ID: "w-000000000000"}, fsm.ErrNotFound},
		{"invalid", context.Background(), fsm.Transfer{ID: a.ID()}, fsm.ErrInvalid},
		{"does not encode", context.Background(), fsm.Register{Spec: bad, Owner: "n1"}, fsm.ErrInvalid},
		{"cancelled", cancelled, fsm.Register{Spec: a, Owner: "n1"}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.AppliedIndex()
			_, err := n.Apply(tt.ctx, tt.cmd)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if errors.Is(err, fsm.ErrConflict) || errors.Is(err, fsm.ErrNotFound) || tt.name == "invalid" {
				if n.AppliedIndex() <= before {
					t.Fatal("a business error was not applied as an entry")
				}
			} else if n.AppliedIndex() != before {
				t.Fatal("a refused write reached the log")
			}
		})
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(context.Background(), fsm.Register{Spec: a, Owner: "n1"}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("after shutdown: %v", err)
	}
	if _, err := n.Info(); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Info after shutdown: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
}

// TestApplyErrorMapping pins what each raft error means for the write.
func TestApplyErrorMapping(t *testing.T) {
	_, trans := raft.NewInmemTransport("")
	n := startNode(t, Config{NodeID: "n1", Ephemeral: true, Transport: trans})
	waitReady(t, n)
	tests := []struct {
		raftErr error
		want    error
		unknown bool
	}{
		{raft.ErrLeadershipLost, raft.ErrLeadershipLost, true},
		{raft.ErrRaftShutdown, ErrShutdown, true},
		{raft.ErrAbortedByRestore, raft.ErrAbortedByRestore, true},
		{raft.ErrEnqueueTimeout, ErrTimeout, false},
		{raft.ErrLeadershipTransferInProgress, ErrNoLeader, false},
		{raft.ErrNotLeader, ErrNoLeader, false}, // this node leads itself: no other leader to name
	}
	for _, tt := range tests {
		t.Run(tt.raftErr.Error(), func(t *testing.T) {
			err := n.applyError(tt.raftErr)
			if !errors.Is(err, tt.want) || errors.Is(err, ErrOutcomeUnknown) != tt.unknown {
				t.Fatalf("applyError(%v) = %v; want %v, unknown %v", tt.raftErr, err, tt.want, tt.unknown)
			}
		})
	}
}

func TestMetricsAndInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, trans := raft.NewInmemTransport("")
	n := startNode(t, Config{NodeID: "n1", Ephemeral: true, Transport: trans, Registerer: reg})
	waitReady(t, n)
	if _, err := n.Apply(context.Background(), fsm.Register{Spec: spec(t, 8001), Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP meshgw_raft_leader 1 if this node is the raft leader, else 0.
# TYPE meshgw_raft_leader gauge
meshgw_raft_leader 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "meshgw_raft_leader"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(collector(t, reg, n, "meshgw_raft_applied_index")); got != float64(n.AppliedIndex()) || got < 2 {
		t.Fatalf("applied index gauge %v, node %d", got, n.AppliedIndex())
	}
	if got := testutil.ToFloat64(collector(t, reg, n, "meshgw_raft_term")); got < 1 {
		t.Fatalf("term gauge %v", got)
	}
	// init_cluster and register; the leader loop observes init_cluster's duration after the
	// FSM applied it, so the series may come a moment after the cluster id.
	testkit.For(t, "the apply duration series of init_cluster and register", func() bool {
		return testutil.CollectAndCount(n.met.apply, "meshgw_raft_apply_duration_seconds") == 2
	})
	info, err := n.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantInfo := Info{Leader: "n1", LeaderAddress: n.Address(), Term: info.Term, AppliedIndex: n.AppliedIndex(),
		Servers: []Server{{ID: "n1", Address: n.Address(), Suffrage: "voter"}}, Voters: 1}
	if diff := cmp.Diff(wantInfo, info); diff != "" || info.Term == 0 {
		t.Fatalf("info (-want +got):\n%s", diff)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Fatalf("%d metric families still registered after shutdown", len(mfs))
	}
}

// collector returns the node's collector of the named series.
func collector(t *testing.T, _ *prometheus.Registry, n *Node, name string) prometheus.Collector {
	t.Helper()
	for _, c := range n.met.collectors {
		if testutil.CollectAndCount(c, name) == 1 {
			return c
		}
	}
	t.Fatalf("no collector for %s", name)
	return nil
}

func TestLeaderLoopRunsAndStops(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	_, trans := raft.NewInmemTransport("")
	n := startNode(t, Config{NodeID: "n1", Ephemeral: true, Transport: trans,
		LeaderLoop: func(ctx context.Context) {
			close(started)
			<-ctx.Done()
			close(stopped)
		}})
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("the leader loop did not start")
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("Shutdown returned before the leader loop did")
	}
}
