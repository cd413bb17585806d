package outcome

import "testing"

// BenchmarkReport measures the data plane's cost of one report: a steady stream of successes
// to one owner, merged into the pending run (the owner is down: flushes drop).
func BenchmarkReport(b *testing.B) {
	r := newTestReporter(b, newNetwork(), Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Report("a", "w1", 1, Success)
		}
	})
}
