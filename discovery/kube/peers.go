package kube

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Peers lists the gateway pods selector names in namespace ("" for every namespace the client
// may list) and returns the mesh addresses to join, IP:port, sorted: one per Running pod with an
// IP that is not being deleted, leaving out those skip reports (this gateway's own, members
// already in the mesh). Readiness is not asked: a gateway that starts is not
// Ready until it joined, so waiting for it would deadlock a fleet that starts together.
func Peers(ctx context.Context, client kubernetes.Interface, namespace string, selector map[string]string, port int,
	skip func(addr string) bool) ([]string, error) {
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: SelectorString(selector)})
	if err != nil {
		where := "in every namespace"
		if namespace != "" {
			where = "in namespace " + namespace
		}
		return nil, fmt.Errorf("listing the gateway pods (--router-selector %s) %s: %s", SelectorString(selector), where, oneLine(err.Error()))
	}
	var out []string
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))
		if skip != nil && skip(addr) {
			continue
		}
		out = append(out, addr)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
