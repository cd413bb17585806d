package console

import (
	"fmt"
	"testing"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/admin"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/worker"
)

// sharedRecords stands in for the raft node's records, which it lists without copying them.
type sharedRecords []fsm.Record

func (s sharedRecords) Worker(id worker.ID) (fsm.Record, bool) { return fsm.Record{}, false }
func (s sharedRecords) Workers() []fsm.Record                  { return append([]fsm.Record(nil), s...) }
func (s sharedRecords) WorkersShared() []fsm.Record            { return s }

// BenchmarkAdminSource is one read of a real gateway's state at 10,000 workers: their raft
// records and this gateway's pool read into the console's rows, and the view the Hub sorts it
// into.
func BenchmarkAdminSource(b *testing.B) {
	p := pool.New(pool.Config{})
	flush := p.Defer()
	var recs sharedRecords
	for i := range 10000 {
		w, _, err := p.Upsert(worker.Spec{URL: fmt.Sprintf("http://10.0.%d.%d:8000", i/256, i%256), Models: []string{"m"}}, pool.OriginLocal)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, fsm.Record{ID: w.ID, Spec: w.Spec(), Owner: fmt.Sprintf("gw%d", i%3)})
	}
	flush()
	src := AdminSource("gw1", admin.New(admin.Config{Pool: p, NodeID: "gw1", Records: recs}))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if v := newView(src.State()); len(v.workers) != 10000 {
			b.Fatalf("%d workers", len(v.workers))
		}
	}
}
