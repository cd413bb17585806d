package cachesync_test

import (
	"context"
	"testing"

	"github.com/meshgw/meshgw/gateway/cachesync/cachesyncbench"
)

// BenchmarkPropagation routes b.N turns of multi-turn chats of 8 KiB prompts through 5
// gateways in turn, to workers owned by two of them, and times how long until every gateway
// knows each turn's whole prompt on its worker: p50, p99 and max in ms, and the bytes of
// reports and publications per request, from the counters (cachesyncbench.Propagation).
func BenchmarkPropagation(b *testing.B) {
	res, err := cachesyncbench.Propagation(context.Background(), cachesyncbench.Options{Requests: b.N})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.P50Ms, "p50-ms")
	b.ReportMetric(res.P99Ms, "p99-ms")
	b.ReportMetric(res.MaxMs, "max-ms")
	b.ReportMetric(res.ReportBytesPerReq, "report-B/req")
	b.ReportMetric(res.PublishBytesPerReq, "publish-B/req")
	b.ReportMetric(0, "ns/op")
}
