package kube

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

// DefaultGrace is how long a discovered pod may stay not Ready before its workers are drained
// and removed: a readiness flap shorter than this changes nothing.
const DefaultGrace = 5 * time.Second

// Rules are the flags Plan applies.
type Rules struct {
	// Port is --service-discovery-port, the port of a pod without AnnotationWorkerPorts.
	Port int
	// ModelID is --model-id-source.
	ModelID ModelIDSource
	// Grace is how long a pod may be not Ready before its workers go. Zero means DefaultGrace.
	Grace time.Duration
}

func (r Rules) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return DefaultGrace
}

// Op is what an Action does.
type Op uint8

const (
	// Register registers Action.Spec (POST /workers).
	Register Op = iota + 1
	// Remove drains and removes the record Action.ID (DELETE /workers/{id}).
	Remove
)

func (o Op) String() string {
	switch o {
	case Register:
		return "register"
	case Remove:
		return "remove"
	}
	return "unknown"
}

// Action is one write Plan asks for.
type Action struct {
	Op   Op
	ID   worker.ID
	URL  string      // the worker's URL
	Spec worker.Spec // Register: the normalized spec
	Pod  string      // namespace/name of the pod it is for; "" for a removal whose pod is gone
	Why  string
}

// Skipped is a pod Plan could make no worker of, and why (a bad annotation, an invalid spec).
type Skipped struct {
	Pod string
	Err error
}

// Plan compares pods (the informer's view: only the pods the selector names) with records (every
// record raft holds) and returns the writes that bring the discovered records in line, sorted by
// URL, registrations first. It is pure: the time is now, and a pod's not-Ready time is the
// Ready condition's lastTransitionTime, so a new leader keeps the grace where the old one was.
//
//   - A Running, Ready pod with an IP, not being deleted, is one worker per port
//     (http://POD_IP:PORT; AnnotationWorkerPorts, else Rules.Port), labelled with the pod's labels
//     plus LabelSource and LabelPod, in the region of its region label, else its zone label. It is
//     registered unless a record of that id exists (one registered by hand is left as it is).
//   - A discovered record (LabelSource=SourceKubernetes) that no such pod wants is removed,
//     unless its pod is not Ready for at most Rules.Grace: then next says when to look again.
//     So a deleted pod, a pod Failed or Succeeded, and the old address of a pod whose IP changed
//     lose their records; a draining record is left to its owner, who removes it.
//   - Records without LabelSource are never touched.
func Plan(now time.Time, pods []*corev1.Pod, records []fsm.Record, r Rules) (acts []Action, next time.Time, skipped []Skipped) {
	want := map[worker.ID]Action{} // Ready pods' workers
	hold := map[worker.ID]bool{}   // not-Ready pods' workers within the grace
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		specs, err := podSpecs(p, r)
		if err != nil {
			skipped = append(skipped, Skipped{Pod: key, Err: err})
			continue
		}
		ready, since := readiness(p)
		for _, s := range specs {
			id := s.ID()
			switch {
			case ready:
				want[id] = Action{Op: Register, ID: id, URL: s.URL, Spec: s, Pod: key, Why: "pod ready"}
			case !since.IsZero() && now.Sub(since) <= r.grace():
				hold[id] = true
				if at := since.Add(r.grace()); next.IsZero() || at.Before(next) {
					next = at
				}
			}
		}
	}
	have := make(map[worker.ID]bool, len(records))
	for i := range records {
		rec := &records[i]
		have[rec.ID] = true
		if rec.Spec.Labels[LabelSource] != SourceKubernetes || rec.Draining || hold[rec.ID] {
			continue
		}
		if _, ok := want[rec.ID]; !ok {
			acts = append(acts, Action{Op: Remove, ID: rec.ID, URL: rec.Spec.URL, Pod: rec.Spec.Labels[LabelPod], Why: "no Ready pod has this address"})
		}
	}
	var regs []Action
	for id, a := range want {
		if !have[id] {
			regs = append(regs, a)
		}
	}
	byURL := func(a, b Action) int { return cmp.Or(cmp.Compare(a.URL, b.URL), cmp.Compare(a.ID, b.ID)) }
	slices.SortFunc(regs, byURL)
	slices.SortFunc(acts, byURL)
	return append(regs, acts...), next, skipped
}

// readiness says whether p serves (Running, Ready, with an IP, not being deleted) and, when it
// does not but may again, since when it has not been Ready. A pod being deleted, Failed or
// Succeeded will not be Ready again: since is zero, and its workers go at once.
func readiness(p *corev1.Pod) (ready bool, since time.Time) {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return false, time.Time{}
	}
	var cond *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			cond = &p.Status.Conditions[i]
		}
	}
	if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && cond != nil && cond.Status == corev1.ConditionTrue {
		return true, time.Time{}
	}
	if cond == nil || cond.Status == corev1.ConditionTrue || cond.LastTransitionTime.IsZero() {
		// Ready but not Running, or no time to count the grace from: held from the pod's start.
		return false, p.CreationTimestamp.Time
	}
	return false, cond.LastTransitionTime.Time
}

// podSpecs are the worker specs of p at its current IP, normalized; none without an IP.
func podSpecs(p *corev1.Pod, r Rules) ([]worker.Spec, error) {
	if p.Status.PodIP == "" {
		return nil, nil
	}
	ports := []int{r.Port}
	if v, ok := p.Annotations[AnnotationWorkerPorts]; ok {
		var err error
		if ports, err = parsePorts(v); err != nil {
			return nil, fmt.Errorf("annotation %s: %v", AnnotationWorkerPorts, err)
		}
	}
	lbls := maps.Clone(p.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[LabelSource] = SourceKubernetes
	lbls[LabelPod] = p.Namespace + "/" + p.Name
	region := p.Labels[LabelRegion]
	if region == "" {
		region = p.Labels[LabelZone]
	}
	model := modelID(p, r.ModelID)
	out := make([]worker.Spec, 0, len(ports))
	for _, port := range ports {
		s := worker.Spec{URL: "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), Labels: maps.Clone(lbls), Region: region, Model: model}
		if err := s.Normalize(); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// modelID is p's model id by src; "" for none.
func modelID(p *corev1.Pod, src ModelIDSource) string {
	switch src.Kind {
	case "namespace":
		return p.Namespace
	case "label":
		return p.Labels[src.Key]
	case "annotation":
		return p.Annotations[src.Key]
	}
	return ""
}
