package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// UploadRun is one run of the memory section's uploads: Uploads bodies of UploadMiB each, posted
// at once through a fresh meshgw to one engine that reads bodies as streams, with meshgw's
// --max-buffered-body-mb at BudgetMiB (0: its default, not given).
type UploadRun struct {
	BudgetMiB int `json:"budget_mib"`
	// EffectiveBudgetMiB is the budget meshgw's /status reports.
	EffectiveBudgetMiB float64 `json:"effective_budget_mib"`
	Uploads            int     `json:"uploads"`
	UploadMiB          int     `json:"upload_mib"`
	// OK counts uploads answered 200 with every byte at the engine; Overloaded those answered 503
	// overloaded_error after waiting for room in the budget; Failed anything else.
	OK         int `json:"ok"`
	Overloaded int `json:"overloaded"`
	Failed     int `json:"failed"`
	// WallS is the time from the first upload's start to the last answer.
	WallS float64 `json:"wall_s"`
	// RSS of meshgw before the uploads, its peak (VmHWM, since its start) and after them.
	RSSBeforeMiB float64 `json:"rss_before_mib"`
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	RSSAfterMiB  float64 `json:"rss_after_mib"`
	// PeakBufferedMiB and Streamed are what meshgw's /status says: the most body bytes it held
	// at once, and the bodies it streamed because they were larger than the whole budget.
	PeakBufferedMiB float64 `json:"peak_buffered_mib"`
	Streamed        int64   `json:"streamed"`
	// Error says why the run stopped short, "" when it did not.
	Error string `json:"error,omitempty"`
}

// runUploads starts an engine that streams bodies, then for each budget a fresh meshgw in
// front of it, and posts the uploads at once.
func runUploads(ctx context.Context, ps *procs, o *Options) any {
	c := o.Control
	engine, urls, err := ps.startURL(ctx, "upload-engine", 1, o.UpstreamBin, "--max-body-mb", strconv.Itoa(2*c.UploadMiB))
	if err != nil {
		return notMeasured(err.Error())
	}
	defer engine.Kill()
	var runs []UploadRun
	for _, budget := range c.UploadBudgetsMiB {
		o.Log.Info("memory: uploads", "uploads", c.Uploads, "mib_each", c.UploadMiB, "budget_mib", budget)
		r := UploadRun{BudgetMiB: budget, Uploads: c.Uploads, UploadMiB: c.UploadMiB}
		if err := uploadRun(ctx, ps, o, urls[0], &r); err != nil {
			r.Error = err.Error()
		}
		runs = append(runs, r)
	}
	return runs
}

// uploadRun measures one run into r.
func uploadRun(ctx context.Context, ps *procs, o *Options, engineURL string, r *UploadRun) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	size := int64(r.UploadMiB) << 20
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--node-id", "bench-upload", "--ephemeral",
		"--worker-urls", engineURL, "--max-payload-size", strconv.FormatInt(2*size, 10), "--log-level", "warn",
		"--raft-port", "0", "--mesh-port", "0", "--rpc-port", "0"}
	if r.BudgetMiB > 0 {
		args = append(args, "--max-buffered-body-mb", strconv.Itoa(r.BudgetMiB))
	}
	name := "meshgw-upload-" + strconv.Itoa(r.BudgetMiB)
	p, err := ps.start(name, nil, o.MeshgwBin, args...)
	if err != nil {
		return err
	}
	g := &controlGateway{p: p, base: "http://127.0.0.1:" + strconv.Itoa(port), started: time.Now(), log: ps.dir + "/" + name + ".log"}
	defer g.stop()
	if err := waitOK(ctx, g, g.base+"/readiness", 30*time.Second); err != nil {
		return err
	}
	before, _, err := rssBytes(p.Pid())
	if err != nil {
		return err
	}
	r.RSSBeforeMiB = mib(before)
	t0 := time.Now()
	statuses := postUploads(ctx, g.base+"/v1/audio/transcriptions", r.Uploads, size)
	r.WallS = time.Since(t0).Seconds()
	for _, s := range statuses {
		switch s {
		case "ok":
			r.OK++
		case "overloaded":
			r.Overloaded++
		default:
			r.Failed++
			o.Log.Warn("memory: upload failed", "budget_mib", r.BudgetMiB, "why", s)
		}
	}
	after, peak, err := rssBytes(p.Pid())
	if err != nil {
		return err
	}
	r.RSSAfterMiB, r.PeakRSSMiB = mib(after), mib(peak)
	var st struct {
		BodyBudget struct {
			Max      int64 `json:"max_buffered_bytes"`
			Peak     int64 `json:"peak_buffered_bytes"`
			Streamed int64 `json:"streamed_total"`
		} `json:"body_budget"`
	}
	if err := getJSON(ctx, &http.Client{Timeout: 5 * time.Second}, g.base+"/status", &st); err != nil {
		return err
	}
	r.PeakBufferedMiB, r.Streamed, r.EffectiveBudgetMiB = mib(st.BodyBudget.Peak), st.BodyBudget.Streamed, mib(st.BodyBudget.Max)
	return nil
}

// waitOK polls url until it answers 200, the gateway exits, or within passes.
func waitOK(ctx context.Context, g *controlGateway, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-g.p.Done():
			return fmt.Errorf("meshgw exited: %v (see %s)", g.p.Err(), g.log)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %s", url, within)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// postUploads posts n bodies of size bytes to url at once, each on its own connection, and
// returns how each ended: "ok", "overloaded", or why it failed.
func postUploads(ctx context.Context, url string, n int, size int64) []string {
	out := make([]string, n)
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = postUpload(ctx, client, url, size) })
	}
	wg.Wait()
	return out
}

func postUpload(ctx context.Context, client *http.Client, url string, size int64) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, io.LimitReader(filler{}, size))
	if err != nil {
		return err.Error()
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var got struct {
		Bytes int64 `json:"bytes"`
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "overloaded_error"):
		return "overloaded"
	case resp.StatusCode != http.StatusOK:
		return fmt.Sprintf("status %d: %.200s", resp.StatusCode, body)
	case json.Unmarshal(body, &got) != nil || got.Bytes != size:
		return fmt.Sprintf("the engine got %d bytes of %d: %.200s", got.Bytes, size, body)
	}
	return "ok"
}

// filler is an endless reader of 'a's: an upload's body, made as it is sent.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}
