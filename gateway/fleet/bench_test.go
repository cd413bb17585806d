package fleet

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/breaker"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/gateway/pool"
	"github.com/meshgw/meshgw/health"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
	"github.com/meshgw/meshgw/worker"
)

// staticRecords is a fixed applied state: WorkersShared copies the records, not their specs,
// as the FSM does.
type staticRecords []fsm.Record

func (s staticRecords) WorkersShared() []fsm.Record { return append([]fsm.Record(nil), s...) }

// ChangedSince says nothing changed after version 0, the only one.
func (staticRecords) ChangedSince(v uint64) (fsm.Changes, bool) { return fsm.Changes{}, v == 0 }

func (staticRecords) Watch() (<-chan struct{}, func()) { return nil, func() {} }

// importedRecords is n records owned by another node, shaped like an operator's registration.
func importedRecords(b *testing.B, n int) staticRecords {
	recs := make(staticRecords, n)
	for i := range recs {
		s := worker.Spec{
			URL:    fmt.Sprintf("http://10.%d.%d.%d:30000", i>>16&255, i>>8&255, i&255),
			Model:  "meta-llama/Llama-3.1-8B-Instruct",
			Region: "us-east-1",
			Labels: map[string]string{"rack": fmt.Sprintf("r%d", i%64)},
		}
		if err := s.Normalize(); err != nil {
			b.Fatal(err)
		}
		recs[i] = fsm.Record{ID: s.ID(), Spec: s, Owner: "n2", Epoch: uint64(i + 1), Revision: uint64(i + 1)}
	}
	return recs
}

// BenchmarkReconcileFirstPass is the pass a gateway runs at start over the records raft
// restored, all imported (owned by another gateway): the pool and the reconciler's own state
// built from nothing. It reports the heap each worker keeps once the pass is done.
func BenchmarkReconcileFirstPass(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			recs := importedRecords(b, n)
			b.ReportAllocs()
			var before, after runtime.MemStats
			for range b.N {
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				p := pool.New(pool.Config{StartPending: true})
				r := New(Config{NodeID: "n1", Records: recs, Pool: p, Logger: testkit.Quiet()})
				r.Reconcile()
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				if len(p.Snapshot().All) != n {
					b.Fatalf("pool holds %d workers", len(p.Snapshot().All))
				}
				runtime.KeepAlive(r)
				b.StartTimer()
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/worker")
		})
	}
}

// BenchmarkReconcileOneChange is the pass that follows one admin write (a disable, toggled on
// a different worker each time) with 100,000 imported records applied: incremental, as the
// reconciler runs it from the FSM's log of what changed, and full, a pass over every record.
// Only the pass is timed, not the raft apply.
func BenchmarkReconcileOneChange(b *testing.B) {
	const n = 100_000
	f := fsm.New(testkit.Quiet())
	for i, rec := range importedRecords(b, n) {
		data, err := fsm.Encode(fsm.Register{Spec: rec.Spec, Owner: rec.Owner})
		if err != nil {
			b.Fatal(err)
		}
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})
	}
	ids := make([]worker.ID, 0, n)
	for _, rec := range f.WorkersShared() {
		ids = append(ids, rec.ID)
	}
	index := uint64(n)
	for _, mode := range []string{"incremental", "full"} {
		b.Run(fmt.Sprintf("%d/%s", n, mode), func(b *testing.B) {
			p := pool.New(pool.Config{StartPending: true})
			r := New(Config{NodeID: "n1", Records: f, Pool: p, Logger: testkit.Quiet()})
			r.Reconcile()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				id := ids[i%n]
				cur, _ := f.Worker(id)
				disabled := !cur.Disabled
				data, err := fsm.Encode(fsm.SetFlags{ID: id, Flags: fsm.FlagChange{Disabled: &disabled, By: "bench"}})
				if err != nil {
					b.Fatal(err)
				}
				index++
				if res := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(fsm.Result); res.Outcome != fsm.Updated {
					b.Fatalf("disable applied as %s", res.Outcome)
				}
				b.StartTimer()
				r.reconcile(mode == "full")
				b.StopTimer()
				if got := p.Get(id).Gates()&pool.GateDisabled != 0; got != disabled {
					b.Fatalf("worker %s disabled %v after the pass, want %v", id, got, disabled)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkImportBulletins applies one bulletin to each of 100,000 imported workers, as a
// gateway does with an owner's whole state (a join or a resync), and reports the time per
// bulletin and the heap the imported state keeps per worker (on top of the pool's).
func BenchmarkImportBulletins(b *testing.B) {
	const n = 100_000
	recs := importedRecords(b, n)
	bs := make([]mesh.Bulletin, n)
	for i, rec := range recs {
		bs[i] = mesh.Bulletin{Worker: string(rec.ID), Owner: "n2", Epoch: rec.Epoch, Health: health.Ready, Breaker: breaker.Closed,
			HealthSuccesses: 2, ProbeInterval: 10 * time.Second}
	}
	var before, after runtime.MemStats
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range bs {
			bs[j].Seq = uint64(i + 1)
			bs[j].Owner = fmt.Sprint("n", 2) // a decoded bulletin's own copy, as from the wire
		}
		p := pool.New(pool.Config{StartPending: true})
		New(Config{NodeID: "n1", Records: recs, Pool: p, Logger: testkit.Quiet()}).Reconcile()
		runtime.GC()
		runtime.ReadMemStats(&before)
		im := NewImporter(ImporterConfig{NodeID: "n1", Pool: p, Logger: testkit.Quiet()})
		b.StartTimer()
		im.Bulletins(bs)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if st, ok := im.Imported(recs[n-1].ID); !ok || st.Bulletin.Health != health.Ready {
			b.Fatalf("the last worker's bulletin was not applied: %+v", st)
		}
		runtime.KeepAlive(im)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/bulletin")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/worker")
}
