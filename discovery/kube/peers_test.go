package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshgw/meshgw/test/fakekube"
)

// TestPeers: --router-selector's list against the scripted API server: the Running gateway
// pods with an IP, at the mesh port, without this gateway's own address; a namespace the
// service account may not list is one clear error.
func TestPeers(t *testing.T) {
	api := fakekube.New()
	defer api.Close()
	client := connect(t, api)
	gw := map[string]string{"app": "meshgw"}
	now := time.Now()
	api.Apply(fakekube.ReadyPod("mesh", "gw-0", "10.2.0.1", gw, now))
	api.Apply(fakekube.SetReady(fakekube.ReadyPod("mesh", "gw-1", "10.2.0.2", gw, now), false, now)) // starting: not Ready yet
	api.Apply(fakekube.ReadyPod("mesh", "gw-2", "10.2.0.3", gw, now))
	api.Apply(fakekube.ReadyPod("mesh", "gw-pending", "", gw, now))
	terminating := fakekube.ReadyPod("mesh", "gw-old", "10.2.0.9", gw, now)
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	api.Apply(terminating)
	failed := fakekube.ReadyPod("mesh", "gw-failed", "10.2.0.8", gw, now)
	failed.Status.Phase = corev1.PodFailed
	api.Apply(failed)
	api.Apply(fakekube.ReadyPod("mesh", "engine", "10.2.0.7", map[string]string{"app": "sglang"}, now))
	api.Apply(fakekube.ReadyPod("other", "gw-x", "10.2.0.6", gw, now))

	self := func(addr string) bool { return addr == "10.2.0.3:39527" }
	got, err := Peers(context.Background(), client, "mesh", gw, 39527, self)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); s != "10.2.0.1:39527 10.2.0.2:39527" {
		t.Errorf("peers %q", s)
	}
	all, err := Peers(context.Background(), client, "", gw, 7946, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(all, " "); s != "10.2.0.1:7946 10.2.0.2:7946 10.2.0.3:7946 10.2.0.6:7946" {
		t.Errorf("peers in every namespace %q", s)
	}

	api.Forbid("mesh")
	_, err = Peers(context.Background(), client, "mesh", gw, 39527, nil)
	if err == nil || !strings.Contains(err.Error(), "listing the gateway pods (--router-selector app=meshgw) in namespace mesh") ||
		!strings.Contains(err.Error(), "forbidden") {
		t.Errorf("error %v", err)
	}
}
