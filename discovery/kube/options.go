package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names of what discovery reads on a pod and writes on a record.
const (
	// AnnotationWorkerPorts is SMG's pod annotation overriding --service-discovery-port: one port
	// or several separated by commas, each a worker.
	AnnotationWorkerPorts = "smg.ai/worker-ports"
	// LabelRegion and LabelZone are the well-known topology labels; a pod's region is the first
	// one set.
	LabelRegion = "topology.kubernetes.io/region"
	LabelZone   = "topology.kubernetes.io/zone"
	// LabelSource marks a record discovery wrote; its value is SourceKubernetes. Discovery
	// touches only records that carry it, so workers registered by hand are never removed.
	LabelSource      = "meshgw.source"
	SourceKubernetes = "kubernetes"
	// LabelPod names the pod (namespace/name) a discovered record stands for.
	LabelPod = "meshgw.pod"
)

// DefaultPort is --service-discovery-port: the worker port of a pod without the annotation.
const DefaultPort = 80

// ParseSelector reads SMG's --selector values: each value holds one or more key=value pairs
// separated by spaces or commas. The result is the label selector's set, never empty.
func ParseSelector(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		for _, kv := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%q is not key=value", kv)
			}
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return nil, fmt.Errorf("label key %q: %s", k, errs[0])
			}
			if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
				return nil, fmt.Errorf("label value %q: %s", val, errs[0])
			}
			if prev, dup := out[k]; dup && prev != val {
				return nil, fmt.Errorf("label key %q is given twice (%s and %s)", k, prev, val)
			}
			out[k] = val
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no key=value given")
	}
	return out, nil
}

// SelectorString renders a selector's set as the API server's labelSelector query takes it.
func SelectorString(set map[string]string) string {
	return labels.SelectorFromSet(set).String()
}

// ModelIDSource says where a discovered worker's model id comes from (--model-id-source): the
// pod's namespace, one of its labels, or one of its annotations. The zero value sets none: the
// worker serves the models it reports.
type ModelIDSource struct {
	Kind string // "", "namespace", "label" or "annotation"
	Key  string // the label or annotation key
}

// ModelIDSourceForms are the values --model-id-source takes, for help and errors.
const ModelIDSourceForms = "namespace, label:KEY or annotation:KEY"

// ParseModelIDSource reads --model-id-source; "" is the zero value.
func ParseModelIDSource(s string) (ModelIDSource, error) {
	kind, key, hasKey := strings.Cut(s, ":")
	switch {
	case s == "":
		return ModelIDSource{}, nil
	case s == "namespace":
		return ModelIDSource{Kind: "namespace"}, nil
	case (kind == "label" || kind == "annotation") && hasKey:
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return ModelIDSource{}, fmt.Errorf("%s key %q: %s", kind, key, errs[0])
		}
		return ModelIDSource{Kind: kind, Key: key}, nil
	}
	return ModelIDSource{}, fmt.Errorf("want %s", ModelIDSourceForms)
}

// String is the flag's form of s.
func (s ModelIDSource) String() string {
	if s.Key != "" {
		return s.Kind + ":" + s.Key
	}
	return s.Kind
}

// CheckNamespace checks --service-discovery-namespace: "" (every namespace the service account
// may list) or a namespace name.
func CheckNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("not a namespace name: %s", errs[0])
	}
	return nil
}

// parsePorts reads the worker-ports annotation: ports 1-65535 separated by commas or spaces,
// sorted and without repeats.
func parsePorts(s string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%q is not a port 1-65535", f)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no port in %q", s)
	}
	sort.Ints(out)
	return out, nil
}

// Config is discovery as the flags set it.
type Config struct {
	// Selector is --selector: the worker pods. Nil: no worker discovery.
	Selector map[string]string
	// Namespace is --service-discovery-namespace; "" is every namespace the client may list.
	Namespace string
	// Rules are how a pod becomes workers.
	Rules Rules
	// RouterSelector is --router-selector: the gateway pods to join. Nil: none.
	RouterSelector map[string]string
}
