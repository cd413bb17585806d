package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/test/testkit"
)

// listFSM records the data of every applied command.
type listFSM struct {
	mu      sync.Mutex
	applied []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, string(l.Data))
	return len(f.applied)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("listFSM does not snapshot")
}

func (f *listFSM) Restore(io.ReadCloser) error { return errors.New("listFSM does not restore") }

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

func testRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = "node-1"
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 20 // no snapshots: the log itself must carry the state
	c.LogOutput = io.Discard
	return c
}

// startRaft runs a single-node raft on the store and waits until it leads.
func startRaft(t *testing.T, s *Store, snapDir string, fsm raft.FSM, bootstrap bool) (*raft.Raft, func()) {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(snapDir, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	addr, trans := raft.NewInmemTransport("")
	conf := testRaftConfig()
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(conf, s, s, snaps, trans, cfg); err != nil {
			t.Fatalf("BootstrapCluster: %v", err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, s, s, snaps, trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	stop := func() {
		if err := r.Shutdown().Error(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		_ = trans.Close()
	}
	testkit.Within(t, 10*time.Second, "raft to lead", func() bool { return r.State() == raft.Leader })
	return r, stop
}

// TestRaftRestartsFromStore runs raft on the store, restarts it on the same files, and checks
// that the log, the term and the configuration survived: the restarted node needs no bootstrap,
// refuses one, re-applies every command and keeps the term rising.
func TestRaftRestartsFromStore(t *testing.T) {
	dir := t.TempDir()
	dbPath, snapDir := filepath.Join(dir, RaftDBName), filepath.Join(dir, SnapshotsDirName)
	s, err := Open(dbPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fsm := &listFSM{}
	r, stop := startRaft(t, s, snapDir, fsm, true)
	var want []string
	for i := range 20 {
		cmd := fmt.Sprintf("cmd-%d", i)
		if err := r.Apply([]byte(cmd), 5*time.Second).Error(); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		want = append(want, cmd)
	}
	termBefore, lastBefore := r.CurrentTerm(), r.LastIndex()
	stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dbPath, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != termBefore {
		t.Errorf("stored CurrentTerm = %d, %v; want %d", term, err, termBefore)
	}
	if last, _ := s.LastIndex(); last != lastBefore {
		t.Errorf("stored LastIndex = %d, want %d", last, lastBefore)
	}
	snaps, _ := raft.NewFileSnapshotStore(snapDir, 1, io.Discard)
	if has, err := raft.HasExistingState(s, s, snaps); err != nil || !has {
		t.Fatalf("HasExistingState after restart = %v, %v; want true", has, err)
	}
	addr, trans := raft.NewInmemTransport("")
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "node-1", Address: addr}}}
	if err := raft.BootstrapCluster(testRaftConfig(), s, s, snaps, trans, cfg); !errors.Is(err, raft.ErrCantBootstrap) {
		t.Errorf("BootstrapCluster on a used store = %v, want ErrCantBootstrap", err)
	}
	_ = trans.Close()

	fsm2 := &listFSM{}
	r2, stop2 := startRaft(t, s, snapDir, fsm2, false)
	defer stop2()
	testkit.Within(t, 10*time.Second, "the restarted node to re-apply the log", func() bool {
		return len(fsm2.list()) >= len(want)
	})
	if got := fsm2.list(); !slices.Equal(got, want) {
		t.Errorf("re-applied %q, want %q", got, want)
	}
	if r2.CurrentTerm() <= termBefore {
		t.Errorf("term after restart = %d, want above %d (a new election on the stored term)",
			r2.CurrentTerm(), termBefore)
	}
	if err := r2.Apply([]byte("after-restart"), 5*time.Second).Error(); err != nil {
		t.Fatalf("Apply after restart: %v", err)
	}
	if r2.LastIndex() <= lastBefore {
		t.Errorf("LastIndex after restart = %d, want above %d", r2.LastIndex(), lastBefore)
	}
	servers := r2.GetConfiguration().Configuration().Servers
	if len(servers) != 1 || servers[0].ID != "node-1" {
		t.Errorf("configuration after restart = %+v, want node-1 alone", servers)
	}
}
