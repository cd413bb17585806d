package console

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuNow is the CPU time this process used so far, user and system.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStreams measures what a gateway spends on 50 open console pages of a synthetic mesh
// of 300 peers and 10,000 workers: one op is one Hub read with churn workers changed since the
// last (read, diff, encode the delta) and its delivery to all 50 streams over loopback HTTP. It
// reports the CPU time per op (the 50 readers' own included: an upper bound) and what that is
// as a share of one core at the Hub's 4 reads a second. streams=0 is the Hub's own work.
func BenchmarkStreams(b *testing.B) {
	for _, streams := range []int{0, 50} {
		for _, churn := range []int{0, 10, 100, 1000} {
			b.Run(fmt.Sprintf("streams=%d/churn=%d", streams, churn), func(b *testing.B) { benchStreams(b, 300, 10000, streams, churn) })
		}
	}
}

func benchStreams(b *testing.B, peers, workers, streams, churn int) {
	src := NewSynthetic(peers, workers, 1)
	hub := NewHub(HubConfig{Source: src, Interval: time.Hour}) // the benchmark reads, not the ticker
	defer hub.Close()
	base := serve(b, New(Config{Hub: hub, Auth: keyAuth("k")}))
	got := make(chan uint64, streams*4) // each reader sends the version of each event it reads
	var wg sync.WaitGroup
	var bodies []*http.Response
	for i := range streams {
		_ = i
		req, _ := http.NewRequest(http.MethodGet, base+"/ui/api/events", nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("stream %d: %v", i, err)
		}
		bodies = append(bodies, resp)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				line := sc.Bytes()
				if len(line) > 12 && string(line[:11]) == `data: {"v":` {
					end := strings.IndexByte(string(line[11:]), ',')
					if v, err := strconv.ParseUint(string(line[11:11+end]), 10, 64); err == nil && end > 0 {
						got <- v
					}
				}
			}
		}()
	}
	defer func() {
		for _, r := range bodies {
			r.Body.Close()
		}
		hub.Close()
		wg.Wait()
	}()
	// waitAll waits until every stream has read an event of version v or later.
	waitAll := func(v uint64) {
		timeout := time.After(30 * time.Second)
		for n := 0; n < streams; {
			select {
			case got := <-got:
				if got >= v {
					n++
				}
			case <-timeout:
				b.Fatalf("%d of %d streams reached version %d in 30 s", n, streams, v)
			}
		}
	}
	waitAll(hub.version())
	b.ResetTimer()
	cpu0 := cpuNow(b)
	for range b.N {
		src.Churn(churn)
		before := hub.version()
		hub.refresh()
		if v := hub.version(); v != before {
			waitAll(v)
		}
	}
	cpu := cpuNow(b) - cpu0
	b.StopTimer()
	perOp := float64(cpu.Microseconds()) / 1000 / float64(b.N)
	b.ReportMetric(perOp, "cpu-ms/op")
	b.ReportMetric(perOp*4/1000*100, "core-%@4/s")
}
