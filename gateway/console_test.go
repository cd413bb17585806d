package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meshgw/meshgw/worker"
)

// TestConsoleOnGateway: /ui is served on the gateway's listener; without an admin key a loopback
// client reads the snapshot of the gateway's pool, with one only the key does; an open stream
// ends at Shutdown instead of holding the drain.
func TestConsoleOnGateway(t *testing.T) {
	open := newEnv(t, Config{})
	open.add(worker.Spec{URL: "http://127.0.0.1:1"})
	resp, err := http.Get(open.base + "/ui/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Node    string
		Workers []struct{ URL string }
	}
	err = json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || snap.Node != "gw-test" || len(snap.Workers) != 1 || snap.Workers[0].URL != "http://127.0.0.1:1" {
		t.Fatalf("snapshot without a key from loopback: %d %v %+v", resp.StatusCode, err, snap)
	}

	keyed := newEnv(t, Config{AdminAPIKey: "sk-admin"})
	for key, want := range map[string]int{"": 401, "wrong": 401, "sk-admin": 200} {
		req, _ := http.NewRequest(http.MethodGet, keyed.base+"/ui/api/snapshot", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("snapshot with key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
	if resp, err := http.Get(keyed.base + "/ui"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /ui: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	req, _ := http.NewRequest(http.MethodGet, keyed.base+"/ui/api/events", nil)
	req.Header.Set("Authorization", "Bearer sk-admin")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("events: %v", err)
	}
	defer stream.Body.Close()
	first, err := bufio.NewReader(stream.Body).ReadString('\n')
	if err != nil || first != "event: snapshot\n" {
		t.Fatalf("first line of the stream %q, %v", first, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := keyed.gw.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a console stream open: %v after %v", err, time.Since(start))
	}
}
