package cachesync

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkPropagation routes multi-turn chats of 8 KiB prompts through 5 gateways in turn, to
// workers owned by two of them, and times how long until every gateway knows each turn's whole
// prompt on its worker: p50 and p99 in ms, and the bytes of reports and publications per
// request, from the counters. Every turn is new: its prompt is its session's previous one
// and a new turn.
func BenchmarkPropagation(b *testing.B) {
	f := newFleet(b, 4)
	names := []string{"a", "b", "c", "d", "e"}
	for i := range 4 {
		f.own(i, names[i%2])
	}
	var nodes []*node
	for _, n := range names {
		nodes = append(nodes, f.start(n))
	}
	time.Sleep(300 * time.Millisecond) // every link up
	system := "You are a careful assistant. " + strings.Repeat("Answer in plain words. ", 300)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		session := i % 16
		turns := strings.Builder{}
		turns.WriteString(system)
		fmt.Fprintf(&turns, " session %d ", session)
		for k := 0; k < i/16; k++ { // the session's earlier turns, then this one
			fmt.Fprintf(&turns, " turn %d of %d: %s", k, session, strings.Repeat("words ", 10))
		}
		fmt.Fprintf(&turns, " turn %d of %d: %s", i/16, session, strings.Repeat("new words ", 10))
		text := turns.String()
		w := session % 4
		start := time.Now()
		f.route(nodes[i%5], w, text, start)
		for _, n := range nodes {
			for !f.knows(n, w, text) {
				if time.Since(start) > 5*time.Second {
					b.Fatalf("%s never learned turn %d", n.id, i)
				}
				time.Sleep(200 * time.Microsecond)
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	var rep, upd int64
	for _, n := range nodes {
		rep += n.sync.Stats().ReportBytes.Load()
		upd += n.sync.Stats().UpdateBytes.Load()
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(rep)/float64(len(lat)), "report-B/req")
	b.ReportMetric(float64(upd)/float64(len(lat)), "publish-B/req")
	b.ReportMetric(0, "ns/op")
}
