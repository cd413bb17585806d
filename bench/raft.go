package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// RaftResult is the raft section: how long an admin write takes to commit.
type RaftResult struct {
	Status string `json:"status"` // "measured"
	// Admin is one meshgw on its own state directory (a mesh of one, bbolt on disk): sequential
	// PUT /workers/{id} writes, each answered once raft has committed and applied it.
	Admin *WriteLatency `json:"admin_write_1_node"`
	// Cluster is `raftbench cluster`: the consensus layer alone, N voters in one process on
	// loopback TCP with bbolt on disk, sequential writes through the leader, without the admin
	// API and its forwarding to the leader.
	Cluster *WriteLatency `json:"write_3_nodes"`
	// ClusterAck is `raftbench cluster --ack`: the same writes, each also fleet-acknowledged by
	// every node's FSM over gRPC. The gap to FleetAck is the gateway's share (HTTP, forwarding,
	// the pool's apply).
	ClusterAck *WriteLatency `json:"fleet_ack_3_nodes_consensus,omitempty"`
	// FleetAck is fleet-acknowledged admin writes through gateways joined on loopback, at 3
	// and 5 gateways (fleetAckWrites).
	FleetAck []*WriteLatency `json:"fleet_ack_writes"`
	// FleetAckMemory is the same with the state directories on tmpfs: the gateways' and the
	// loopback network's share, without the disk's. Nil where there is no tmpfs.
	FleetAckMemory []*WriteLatency `json:"fleet_ack_writes_tmpfs,omitempty"`
	// DiskCommit is `raftbench commit`: one raft log append made durable on the disk of the
	// state directories. A fleet-acknowledged write pays one three times in a row: the write on
	// the leader, then on the followers, then each node's store of the commit index once it
	// learned that the write committed (consensus.Node.keepCommit).
	DiskCommit *WriteLatency `json:"disk_commit,omitempty"`
	// DiskCommitAt is the same with as many stores appending at once as fleetAckSizes has
	// gateways, each round as slow as its slowest: the followers of one write append together,
	// and every node stores the commit index together. On a machine whose gateways share one
	// disk, three times its p50 is the fleet-acknowledged write's floor, and its p99 the disk's
	// share of that write's p99.
	DiskCommitAt []*WriteLatency `json:"disk_commit_at,omitempty"`
}

// WriteLatency is the latency of sequential writes.
type WriteLatency struct {
	Nodes        int     `json:"nodes"`
	Writes       int     `json:"writes"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	WritesPerSec float64 `json:"writes_per_s"`
	What         string  `json:"what"`
}

// runRaft measures the raft section; a part that fails is reported as an error string in the
// log and leaves the section not measured.
func runRaft(ctx context.Context, ps *procs, o *Options) any {
	c := o.Control
	o.Log.Info("raft: admin writes through one meshgw", "writes", c.AdminWrites)
	admin, err := adminWrites(ctx, ps, o)
	if err != nil {
		return notMeasured("admin writes: " + err.Error())
	}
	o.Log.Info("raft: writes through a cluster's leader", "nodes", c.ClusterNodes, "writes", c.ClusterWrites)
	dir, err := tempStateDir(o, "raft-cluster")
	if err != nil {
		return notMeasured(err.Error())
	}
	var cl WriteLatency // raftbench prints these fields, and a few more
	if err := runRaftbench(ps, c, "raftbench-cluster", 2*time.Minute, &cl, "cluster", "--nodes", fmt.Sprint(c.ClusterNodes),
		"--writes", fmt.Sprint(c.ClusterWrites), "--dir", dir); err != nil {
		return notMeasured("cluster writes: " + err.Error())
	}
	cl.What = "consensus.Node.Apply on the leader to the applied result; voters in one process on loopback TCP, bbolt on disk"
	var ca WriteLatency
	if err := runRaftbench(ps, c, "raftbench-cluster-ack", 2*time.Minute, &ca, "cluster", "--nodes", fmt.Sprint(c.ClusterNodes),
		"--writes", fmt.Sprint(c.ClusterWrites), "--ack", "--dir", filepath.Join(dir, "ack")); err != nil {
		return notMeasured("fleet-acknowledged cluster writes: " + err.Error())
	}
	ca.What = "the same, each also fleet-acknowledged: until every node's FSM applied it (consensus.FleetAck over loopback gRPC)"
	res := RaftResult{Status: "measured", Admin: admin, Cluster: &cl, ClusterAck: &ca}
	var dc WriteLatency
	if err := runRaftbench(ps, c, "raftbench-commit", time.Minute, &dc, "commit", "--writes", "1000", "--dir", dir); err != nil {
		return notMeasured("disk commits: " + err.Error())
	}
	dc.Nodes = 1
	dc.What = "one raft log entry appended and made durable (one bbolt transaction) in the state directory's file system"
	res.DiskCommit = &dc
	for _, n := range fleetAckSizes {
		var at WriteLatency
		if err := runRaftbench(ps, c, fmt.Sprintf("raftbench-commit-%d", n), time.Minute, &at, "commit", "--writes", "1000",
			"--stores", fmt.Sprint(n), "--dir", filepath.Join(dir, fmt.Sprintf("commit-%d", n))); err != nil {
			return notMeasured("disk commits: " + err.Error())
		}
		at.What = fmt.Sprintf("the same appended to %d stores at once on that file system, each round as slow as its slowest", n)
		res.DiskCommitAt = append(res.DiskCommitAt, &at)
	}
	if res.FleetAck, err = fleetAckRuns(ctx, ps, o, false); err != nil {
		return notMeasured(err.Error())
	}
	if err := noTmpfs(); err != nil {
		o.Log.Info("raft: fleet-acknowledged writes on tmpfs not measured", "err", err)
		return res
	}
	if res.FleetAckMemory, err = fleetAckRuns(ctx, ps, o, true); err != nil {
		return notMeasured(err.Error())
	}
	return res
}

// fleetAckRuns measures the fleet-acknowledged writes at each of fleetAckSizes, with the state
// on tmpfs when inMemory.
func fleetAckRuns(ctx context.Context, ps *procs, o *Options, inMemory bool) ([]*WriteLatency, error) {
	where := ""
	if inMemory {
		where = " on tmpfs"
	}
	var out []*WriteLatency
	for _, n := range fleetAckSizes {
		o.Log.Info("raft: fleet-acknowledged writes"+where, "gateways", n, "writes", o.Control.AdminWrites)
		l, err := fleetAckWrites(ctx, ps, o, n, o.Control.AdminWrites, inMemory)
		if err != nil {
			return nil, fmt.Errorf("fleet-acknowledged writes%s, %d gateways: %w", where, n, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// adminWrites starts meshgw on a fresh state directory, registers one worker through the admin
// API and times AdminWrites PUTs that disable and enable it in turn.
func adminWrites(ctx context.Context, ps *procs, o *Options) (*WriteLatency, error) {
	dir, err := tempStateDir(o, "raft-admin")
	if err != nil {
		return nil, err
	}
	g, err := startControlGateway(ps, o, "meshgw-raft", dir)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	if _, err := g.waitStatus(ctx, 15*time.Second, func(s gatewayStatus) bool { return s.Raft != nil && s.Raft.Leader == "bench" }); err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// A worker nobody listens on: its health checks fail, which changes no record.
	var reg struct {
		ID string `json:"id"`
	}
	if err := send(ctx, client, http.MethodPost, g.base+"/workers", `{"url":"http://127.0.0.1:9"}`, &reg); err != nil {
		return nil, err
	}
	body := [2]string{`{"disabled":true,"reason":"bench"}`, `{"disabled":false}`}
	for i := range 50 { // warm-up: connections, bbolt pages
		if err := send(ctx, client, http.MethodPut, g.base+"/workers/"+reg.ID, body[i%2], nil); err != nil {
			return nil, err
		}
	}
	lat := make([]time.Duration, 0, o.Control.AdminWrites)
	start := time.Now()
	for i := range o.Control.AdminWrites {
		t0 := time.Now()
		if err := send(ctx, client, http.MethodPut, g.base+"/workers/"+reg.ID, body[i%2], nil); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	took := time.Since(start)
	p50, p99, mx := quantiles(lat)
	return &WriteLatency{Nodes: 1, Writes: len(lat), P50Ms: p50, P99Ms: p99, MaxMs: mx, WritesPerSec: float64(len(lat)) / took.Seconds(),
		What: "PUT /workers/{id} {\"disabled\": …} on one meshgw with --state-dir, from request to answer"}, nil
}

// statusError is an answer other than 2xx, with its status code.
type statusError struct {
	Code int
	Msg  string
}

func (e *statusError) Error() string { return e.Msg }

// send makes one admin request and decodes a 2xx answer into v (nil: discarded); another
// status is a *statusError.
func send(ctx context.Context, c *http.Client, method, url, body string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{Code: resp.StatusCode, Msg: fmt.Sprintf("%s %s: %s %s", method, url, resp.Status, strings.TrimSpace(string(data)))}
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(data, v)
}
