package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/meshgw/meshgw/test/fakekube"
	"github.com/meshgw/meshgw/test/harness"
)

// TestRouterSelector: three gateways started together with --router-selector app=meshgw and
// --bootstrap-expect 3 and no --join find each other through the scripted API server's pods
// (their pod IPs 127.0.0.2-4, joined at the shared --mesh-port) and form one raft cluster; a
// fourth started later with the same flags (a Deployment scaled up) joins it.
func TestRouterSelector(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	start := time.Now()
	api := startFakeKube(t)
	meshPort := harness.FreePort(t)
	b := harness.Build(t)
	var gws []*clusterGW
	startGW := func(i int) *clusterGW {
		host := fmt.Sprintf("127.0.0.%d", i+2)
		id := fmt.Sprintf("r%d", i+1)
		// The gateway pod: Running, not Ready yet (a gateway is Ready only once it joined).
		p := fakekube.ReadyPod("gw", "meshgw-"+id, host, map[string]string{"app": "meshgw"}, time.Now())
		api.Apply(fakekube.SetReady(p, false, time.Now()))
		port, metrics := harness.FreePort(t), harness.FreePort(t)
		args := []string{"--node-id", id, "--host", host, "--port", strconv.Itoa(port), "--prometheus-host", host,
			"--prometheus-port", strconv.Itoa(metrics), "--mesh-port", strconv.Itoa(meshPort), "--raft-port", "0", "--rpc-port", "0",
			"--state-dir", t.TempDir(), "--mesh-profile", "local", "--bootstrap-expect", "3",
			"--router-selector", "app=meshgw", "--service-discovery-namespace", "gw"}
		proc := harness.Start(t, id, b.Meshgw, args, nil, nil)
		proc.URL = "http://" + host + ":" + strconv.Itoa(port)
		return &clusterGW{Gateway: &harness.Gateway{Proc: proc, Port: port, MetricsPort: metrics}, id: id}
	}
	live := func(g *clusterGW) {
		harness.WaitFor(t, clusterBound, g.id+" answers /liveness", func() bool {
			if g.Exited() {
				t.Fatalf("%s exited:\n%s", g.id, g.Output())
			}
			return harness.Get(g.URL+"/liveness") == http.StatusOK
		})
	}
	for i := range 3 {
		gws = append(gws, startGW(i))
	}
	for _, g := range gws {
		live(g)
	}
	leader := waitFormed(t, gws...)
	t.Logf("three gateways found each other by --router-selector and formed a cluster led by %s in %v", leader,
		time.Since(start).Round(time.Millisecond))

	// The Deployment scales up: a fourth pod with the same flags joins the fleet that exists.
	scaled := time.Now()
	gws = append(gws, startGW(3))
	live(gws[3])
	waitFormed(t, gws...)
	t.Logf("a fourth gateway joined the fleet by --router-selector in %v", time.Since(scaled).Round(time.Millisecond))
}

// startFakeKube starts the scripted API server for the test and points the gateways it starts
// at it: they inherit $KUBECONFIG, and no in-cluster configuration applies.
func startFakeKube(t *testing.T) *fakekube.Server {
	t.Helper()
	api := fakekube.New()
	t.Cleanup(api.Close)
	kubeconfig, err := api.WriteKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	return api
}
