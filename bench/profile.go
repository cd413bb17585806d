package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshgw/meshgw/bench/engine"
)

// ProfileSection holds the CPU profiles of meshgw taken under load, in runs that are not part
// of the measured figures.
type ProfileSection struct {
	Plain  *Profile `json:"plain,omitempty"`
	Stream *Profile `json:"stream,omitempty"`
}

// Profile is one CPU profile: where it was saved and its top functions (go tool pprof -top).
type Profile struct {
	File    string   `json:"file"`
	Seconds int      `json:"seconds"`
	Top     []string `json:"top,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// profileMeshgw takes one CPU profile of meshgw under the wrk load and one under the streaming
// load, each for o.Duration, through meshgw's /debug/pprof (--enable-pprof).
func profileMeshgw(ctx context.Context, o *Options, t target) *ProfileSection {
	secs := max(2, int(o.Duration/time.Second))
	ps := &ProfileSection{}
	wo := WrkOptions{Bin: o.WrkBin, Threads: o.Threads, Connections: o.Connections, Marker: engine.CompletionMarker,
		Dir: o.WorkDir, URL: t.url + chatPath, Duration: time.Duration(secs+1) * time.Second}
	o.Log.Info("profiling meshgw", "load", "wrk", "seconds", secs)
	ps.Plain = takeProfile(ctx, o, t, secs, "meshgw-cpu-plain.pprof", func() { _, _, _ = RunWrk(ctx, wo) })
	o.Log.Info("profiling meshgw", "load", "streams", "seconds", secs)
	ps.Stream = takeProfile(ctx, o, t, secs, "meshgw-cpu-stream.pprof", func() {
		RunStreams(ctx, StreamOptions{URL: t.url + chatPath, Streams: o.Streams, Duration: time.Duration(secs+1) * time.Second,
			Events: o.StreamEvents})
	})
	return ps
}

// takeProfile runs load while fetching a CPU profile of secs seconds, saves it in
// o.ProfileDir and reads its top functions.
func takeProfile(ctx context.Context, o *Options, t target, secs int, name string, load func()) *Profile {
	p := &Profile{File: filepath.Join(o.ProfileDir, name), Seconds: secs}
	got := make(chan error, 1)
	go func() { got <- fetchProfile(ctx, t.pprofURL, secs, p.File) }()
	load()
	if err := <-got; err != nil {
		p.Error = err.Error()
		return p
	}
	top, err := pprofTop(ctx, o.MeshgwBin, p.File)
	if err != nil {
		p.Error = "go tool pprof: " + err.Error()
	}
	p.Top = top
	return p
}

func fetchProfile(ctx context.Context, base string, secs int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/profile: status %d", resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pprofTop returns the lines of `go tool pprof -top` for the 20 functions with the most CPU
// of their own.
func pprofTop(ctx context.Context, bin, file string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := execCommand(ctx, "go", "tool", "pprof", "-top", "-nodecount=20", bin, file).Output()
	if err != nil {
		return nil, err
	}
	return parsePprofTop(string(out)), nil
}

// parsePprofTop keeps the summary and table lines of pprof's -top output.
func parsePprofTop(out string) []string {
	var keep []string
	table := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Duration:") || strings.HasPrefix(line, "Showing "):
			keep = append(keep, strings.TrimSpace(line))
		case strings.Contains(line, "flat%") && strings.Contains(line, "cum%"):
			table = true
			keep = append(keep, strings.TrimRight(line, " "))
		case table && strings.TrimSpace(line) != "":
			keep = append(keep, strings.TrimRight(line, " "))
		}
	}
	return keep
}
