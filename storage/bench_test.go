package storage

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkStoreLogs measures one durable batch of 64 small entries: one bbolt commit, so one
// fsync, per iteration.
func BenchmarkStoreLogs(b *testing.B) {
	s := openTemp(b)
	const batch = 64
	logs := make([]*raft.Log, batch)
	for i := range logs {
		logs[i] = &raft.Log{Term: 1, Data: make([]byte, 100)}
	}
	next := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range logs {
			l.Index = next
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next-1), "ns/entry")
}

// BenchmarkGetLog measures reading one entry from a store of 10,000.
func BenchmarkGetLog(b *testing.B) {
	s := openTemp(b)
	const n = 10_000
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Data: make([]byte, 100)}
	}
	if err := s.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	var l raft.Log
	i := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.GetLog(i%n+1, &l); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSaveFSMFull measures a full save of the applied state (every record, handed over in
// the random order of a Go map, as after a restore): the cost per record should not grow with
// the records.
func BenchmarkSaveFSMFull(b *testing.B) {
	for _, n := range []int{10_000, 50_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := openTemp(b)
			keys := make(map[string]struct{}, n)
			for i := range n {
				keys[fmt.Sprintf("http://10.%d.%d.%d:30000", i>>16&255, i>>8&255, i&255)] = struct{}{}
			}
			value := make([]byte, 120)
			b.ReportAllocs()
			for b.Loop() {
				d := FSMDelta{Meta: []byte{1}, Full: true}
				for k := range keys {
					d.Puts = append(d.Puts, KV{Key: []byte(k), Value: value})
				}
				if err := s.SaveFSM(d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}

// BenchmarkDeleteRange measures raft's compaction after a snapshot: 8,192 entries of 200 bytes
// deleted in one transaction.
func BenchmarkDeleteRange(b *testing.B) {
	const n = 8192
	s := openTemp(b)
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Term: 1, Data: make([]byte, 200)}
	}
	next := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		first := next
		for _, l := range logs {
			l.Index = next
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.DeleteRange(first, next-1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}
