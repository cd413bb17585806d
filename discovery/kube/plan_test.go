package kube

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

var t0 = time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)

// pod is a test pod: Running and Ready at ip unless changed.
func pod(name, ip string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "sglang"}, CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func notReadySince(at time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions[0].Status, p.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(at)
	}
}

func annotate(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
}

func label(k, v string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Labels[k] = v } }

// discovered is the record discovery wrote for pod name at url.
func discovered(name, url string) fsm.Record {
	s := worker.Spec{URL: url, Labels: map[string]string{"app": "sglang", LabelSource: SourceKubernetes, LabelPod: "ns/" + name}}
	if err := s.Normalize(); err != nil {
		panic(err)
	}
	return fsm.Record{ID: s.ID(), Spec: s, Owner: "gw-1"}
}

// byHand is a record an operator registered at url.
func byHand(url string) fsm.Record {
	s := worker.Spec{URL: url}
	if err := s.Normalize(); err != nil {
		panic(err)
	}
	return fsm.Record{ID: s.ID(), Spec: s, Owner: "gw-1"}
}

// render writes actions as "register URL" / "remove URL" lines.
func render(acts []Action) string {
	var b []string
	for _, a := range acts {
		b = append(b, fmt.Sprintf("%s %s", a.Op, a.URL))
	}
	return strings.Join(b, "; ")
}

func TestPlan(t *testing.T) {
	rules := Rules{Port: 8000, Grace: 5 * time.Second}
	draining := discovered("gone", "http://10.0.0.9:8000")
	draining.Draining = true
	deleting := pod("a", "10.0.0.1")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		records  []fsm.Record
		want     string
		wantNext time.Time
	}{
		{"nothing", nil, nil, "", time.Time{}},
		{"a Ready pod is registered at the port flag", []*corev1.Pod{pod("a", "10.0.0.1")}, nil, "register http://10.0.0.1:8000", time.Time{}},
		{"a registered Ready pod is left", []*corev1.Pod{pod("a", "10.0.0.1")}, []fsm.Record{discovered("a", "http://10.0.0.1:8000")}, "", time.Time{}},
		{"the annotation's ports override the flag", []*corev1.Pod{pod("a", "10.0.0.1", annotate(AnnotationWorkerPorts, "9001, 9000"))}, nil,
			"register http://10.0.0.1:9000; register http://10.0.0.1:9001", time.Time{}},
		{"a bad annotation skips the pod", []*corev1.Pod{pod("a", "10.0.0.1", annotate(AnnotationWorkerPorts, "http"))}, nil, "", time.Time{}},
		{"a pod without an IP is not registered", []*corev1.Pod{pod("a", "")}, nil, "", time.Time{}},
		{"a Pending pod is not registered", []*corev1.Pod{pod("a", "10.0.0.1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })}, nil, "", time.Time{}},
		{"a pod not Ready within the grace is held", []*corev1.Pod{pod("a", "10.0.0.1", notReadySince(t0.Add(-3*time.Second)))},
			[]fsm.Record{discovered("a", "http://10.0.0.1:8000")}, "", t0.Add(2 * time.Second)},
		{"exactly the grace is still held", []*corev1.Pod{pod("a", "10.0.0.1", notReadySince(t0.Add(-5*time.Second)))},
			[]fsm.Record{discovered("a", "http://10.0.0.1:8000")}, "", t0},
		{"a pod not Ready past the grace is removed", []*corev1.Pod{pod("a", "10.0.0.1", notReadySince(t0.Add(-6*time.Second)))},
			[]fsm.Record{discovered("a", "http://10.0.0.1:8000")}, "remove http://10.0.0.1:8000", time.Time{}},
		{"a not Ready pod is not registered", []*corev1.Pod{pod("a", "10.0.0.1", notReadySince(t0.Add(-time.Second)))}, nil, "", t0.Add(4 * time.Second)},
		{"a deleted pod is removed", nil, []fsm.Record{discovered("a", "http://10.0.0.1:8000")}, "remove http://10.0.0.1:8000", time.Time{}},
		{"a pod being deleted is removed at once", []*corev1.Pod{deleting}, []fsm.Record{discovered("a", "http://10.0.0.1:8000")},
			"remove http://10.0.0.1:8000", time.Time{}},
		{"a Failed pod is removed at once", []*corev1.Pod{pod("a", "10.0.0.1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
			[]fsm.Record{discovered("a", "http://10.0.0.1:8000")}, "remove http://10.0.0.1:8000", time.Time{}},
		{"an IP change is a new worker and the old one goes", []*corev1.Pod{pod("a", "10.0.0.2")}, []fsm.Record{discovered("a", "http://10.0.0.1:8000")},
			"register http://10.0.0.2:8000; remove http://10.0.0.1:8000", time.Time{}},
		{"a hand-registered worker is never removed", nil, []fsm.Record{byHand("http://10.0.0.1:8000")}, "", time.Time{}},
		{"a hand-registered worker at a pod's address is left as it is", []*corev1.Pod{pod("a", "10.0.0.1")}, []fsm.Record{byHand("http://10.0.0.1:8000")}, "", time.Time{}},
		{"a draining record is left to its owner", nil, []fsm.Record{draining}, "", time.Time{}},
		{"the earliest grace end wakes", []*corev1.Pod{pod("a", "10.0.0.1", notReadySince(t0.Add(-1*time.Second))), pod("b", "10.0.0.2", notReadySince(t0.Add(-4*time.Second)))},
			nil, "", t0.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts, next, _ := Plan(t0, tt.pods, tt.records, rules)
			if got := render(acts); got != tt.want {
				t.Errorf("actions %q, want %q", got, tt.want)
			}
			if !next.Equal(tt.wantNext) {
				t.Errorf("next %v, want %v", next, tt.wantNext)
			}
		})
	}
}

// TestPlanSpec: what a registration carries: the pod's labels with the discovery marks, its
// region (else zone), and the model id by --model-id-source.
func TestPlanSpec(t *testing.T) {
	tests := []struct {
		name       string
		p          *corev1.Pod
		src        ModelIDSource
		wantRegion string
		wantModel  string
	}{
		{"plain", pod("a", "10.0.0.1"), ModelIDSource{}, "", ""},
		{"region label", pod("a", "10.0.0.1", label(LabelRegion, "eu-west-1"), label(LabelZone, "eu-west-1a")), ModelIDSource{}, "eu-west-1", ""},
		{"zone label alone", pod("a", "10.0.0.1", label(LabelZone, "eu-west-1a")), ModelIDSource{}, "eu-west-1a", ""},
		{"model from the namespace", pod("a", "10.0.0.1"), ModelIDSource{Kind: "namespace"}, "", "ns"},
		{"model from a label", pod("a", "10.0.0.1", label("model", "llama")), ModelIDSource{Kind: "label", Key: "model"}, "", "llama"},
		{"model from an annotation", pod("a", "10.0.0.1", annotate("smg.ai/model", "qwen")), ModelIDSource{Kind: "annotation", Key: "smg.ai/model"}, "", "qwen"},
		{"model label missing", pod("a", "10.0.0.1"), ModelIDSource{Kind: "label", Key: "model"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts, _, skipped := Plan(t0, []*corev1.Pod{tt.p}, nil, Rules{Port: 80, ModelID: tt.src})
			if len(acts) != 1 || len(skipped) != 0 {
				t.Fatalf("actions %v skipped %v", acts, skipped)
			}
			s := acts[0].Spec
			if model := strings.Join(s.ModelList(), ","); s.URL != "http://10.0.0.1:80" || s.Region != tt.wantRegion || model != tt.wantModel {
				t.Errorf("spec url %s region %q models %q", s.URL, s.Region, model)
			}
			if s.Labels["app"] != "sglang" || s.Labels[LabelSource] != SourceKubernetes || s.Labels[LabelPod] != "ns/a" {
				t.Errorf("labels %v", s.Labels)
			}
			if acts[0].Pod != "ns/a" {
				t.Errorf("pod %q", acts[0].Pod)
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	tests := []struct {
		in      []string
		want    string
		wantErr string
	}{
		{[]string{"app=sglang"}, "app=sglang", ""},
		{[]string{"app=sglang tier=gpu"}, "app=sglang,tier=gpu", ""},
		{[]string{"app=sglang", "tier=gpu"}, "app=sglang,tier=gpu", ""},
		{[]string{"app.kubernetes.io/name=sglang,tier=gpu"}, "app.kubernetes.io/name=sglang,tier=gpu", ""},
		{[]string{"app="}, "app=", ""},
		{[]string{"app"}, "", `"app" is not key=value`},
		{[]string{"=x"}, "", `"=x" is not key=value`},
		{[]string{"a b=c"}, "", `"a" is not key=value`},
		{[]string{"app=a b"}, "", `"b" is not key=value`},
		{[]string{"app=x", "app=y"}, "", `label key "app" is given twice`},
		{[]string{"bad key=x"}, "", `"bad" is not key=value`},
		{[]string{"-app=x"}, "", `label key "-app"`},
		{[]string{"app=" + strings.Repeat("v", 64)}, "", "label value"},
		{[]string{""}, "", "no key=value given"},
		{nil, "", "no key=value given"},
	}
	for _, tt := range tests {
		got, err := ParseSelector(tt.in)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case SelectorString(got) != tt.want:
			t.Errorf("%q: %q, want %q", tt.in, SelectorString(got), tt.want)
		}
	}
}

func TestParseModelIDSource(t *testing.T) {
	for in, want := range map[string]string{"": "", "namespace": "namespace", "label:model": "label:model", "annotation:smg.ai/model": "annotation:smg.ai/model"} {
		got, err := ParseModelIDSource(in)
		if err != nil || got.String() != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"pod", "label", "label:", "annotation:", "label:bad key", "namespace:x", "Namespace"} {
		if _, err := ParseModelIDSource(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
