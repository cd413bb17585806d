package check

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestGreenOverlay: the green fleet joins blue's cluster (it never bootstraps one of its own),
// and no selector of either fleet picks the other's pods, so that draining blue
// (`meshctl drain --color blue`) and deleting it leave green whole.
func TestGreenOverlay(t *testing.T) {
	var blue, green rendered
	for _, r := range renderAll(t) {
		switch r.name {
		case "deploy/kubernetes/base":
			blue = r
		case "deploy/kubernetes/overlays/green":
			green = r
		}
	}
	if len(blue.statefulSets) != 1 || len(green.statefulSets) != 1 {
		t.Fatal("the base or the green overlay has no StatefulSet")
	}
	b, g := blue.statefulSets[0], green.statefulSets[0]
	genv, benv := containerEnv(g.Spec.Template.Spec.Containers[0]), containerEnv(b.Spec.Template.Spec.Containers[0])
	if genv["MESHGW_COLOR"] != "green" || benv["MESHGW_COLOR"] != "blue" {
		t.Errorf("colors: blue %q, green %q", benv["MESHGW_COLOR"], genv["MESHGW_COLOR"])
	}
	if genv["MESHGW_BOOTSTRAP_EXPECT"] != "0" {
		t.Errorf("green MESHGW_BOOTSTRAP_EXPECT=%q; want 0: green joins blue's cluster", genv["MESHGW_BOOTSTRAP_EXPECT"])
	}
	if !strings.Contains(genv["MESHGW_JOIN"], b.Spec.ServiceName+".") {
		t.Errorf("green MESHGW_JOIN %q does not name blue's headless Service %s", genv["MESHGW_JOIN"], b.Spec.ServiceName)
	}
	if !strings.HasSuffix(g.Name, "-green") || g.Spec.ServiceName == b.Spec.ServiceName {
		t.Errorf("green StatefulSet %s with Service %s; want its own names", g.Name, g.Spec.ServiceName)
	}
	for _, pair := range []struct {
		who     string
		r       rendered
		against map[string]string
	}{{"blue", blue, g.Spec.Template.Labels}, {"green", green, b.Spec.Template.Labels}} {
		for _, svc := range pair.r.services {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pair.against)) {
				t.Errorf("%s Service %s selects the other fleet's pods", pair.who, svc.Name)
			}
		}
		for _, pdb := range pair.r.pdbs {
			if s, err := metav1Selector(pdb.Spec.Selector); err == nil && s.Matches(labels.Set(pair.against)) {
				t.Errorf("%s PodDisruptionBudget %s selects the other fleet's pods", pair.who, pdb.Name)
			}
		}
	}
}
