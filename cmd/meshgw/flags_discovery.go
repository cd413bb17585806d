package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/meshgw/meshgw/discovery/kube"
)

// discoveryFlags are Kubernetes service discovery's (DESIGN.md section 18, discovery/kube), in
// SMG's forms: --selector and --router-selector take space-separated key=value pairs and repeat.
type discoveryFlags struct {
	enabled        bool
	selector       []string
	port           int
	namespace      string
	modelIDSource  string
	routerSelector []string

	health  *healthFlags  // --remove-unhealthy-workers defaults on with discovery
	cluster *clusterFlags // --router-selector is instead of --join

	// Parsed by validate.
	sel, routerSel map[string]string
	modelID        kube.ModelIDSource
}

func (f *discoveryFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "service-discovery", false, "register the Running and Ready pods --selector names as workers, and drain and remove them when they go (Kubernetes; the raft leader watches, in a pod with its service account, elsewhere with $KUBECONFIG or ~/.kube/config); turns --remove-unhealthy-workers on unless it is given")
	fs.StringArrayVar(&f.selector, "selector", nil, "with --service-discovery: the label selector of the worker pods, key=value pairs separated by spaces, repeatable (SMG's form: --selector app=sglang tier=gpu)")
	fs.IntVar(&f.port, "service-discovery-port", kube.DefaultPort, "with --service-discovery: the worker port of a pod, unless its "+kube.AnnotationWorkerPorts+" annotation names ports (comma-separated, each a worker)")
	fs.StringVar(&f.namespace, "service-discovery-namespace", "", "with --service-discovery or --router-selector: the namespace whose pods they list (default: every namespace the service account may list)")
	fs.StringVar(&f.modelIDSource, "model-id-source", "", "with --service-discovery: where a pod's model id comes from: "+kube.ModelIDSourceForms+" (default: none; the worker serves what it reports)")
	fs.StringArrayVar(&f.routerSelector, "router-selector", nil, "find the other gateways by this label selector of their pods instead of --join (a Deployment rather than a StatefulSet; with --bootstrap-expect), key=value pairs separated by spaces, repeatable; they are joined at their pod IP and this gateway's --mesh-port")
}

func (f *discoveryFlags) validate() error {
	if !f.enabled {
		for _, g := range []struct {
			name  string
			given bool
		}{{"selector", len(f.selector) > 0}, {"service-discovery-namespace", f.namespace != "" && len(f.routerSelector) == 0},
			{"model-id-source", f.modelIDSource != ""}} {
			if g.given {
				return usagef("--%s needs --service-discovery", g.name)
			}
		}
	}
	if len(f.routerSelector) > 0 {
		sel, err := kube.ParseSelector(f.routerSelector)
		if err != nil {
			return valuef("router-selector", "%q: %v", strings.Join(f.routerSelector, " "), err)
		}
		f.routerSel = sel
		if f.cluster != nil && len(f.cluster.join) > 0 {
			return usagef("--router-selector and --join both say how to find the other gateways; give one of them")
		}
		if f.cluster != nil && f.cluster.bootstrapExpect == 0 {
			return usagef("--router-selector needs --bootstrap-expect N: the gateways that find each other bootstrap raft together once N of them see each other")
		}
		if err := kube.CheckNamespace(f.namespace); err != nil {
			return valuef("service-discovery-namespace", "%q: %v", f.namespace, err)
		}
	}
	if !f.enabled {
		return nil
	}
	if len(f.selector) == 0 {
		return usagef("--service-discovery needs --selector key=value (the worker pods' labels, e.g. --selector app=sglang)")
	}
	sel, err := kube.ParseSelector(f.selector)
	if err != nil {
		return valuef("selector", "%q: %v", strings.Join(f.selector, " "), err)
	}
	f.sel = sel
	if err := checkPort("service-discovery-port", f.port, false); err != nil {
		return err
	}
	if err := kube.CheckNamespace(f.namespace); err != nil {
		return valuef("service-discovery-namespace", "%q: %v", f.namespace, err)
	}
	if f.modelID, err = kube.ParseModelIDSource(f.modelIDSource); err != nil {
		return valuef("model-id-source", "%q: %v", f.modelIDSource, err)
	}
	// SMG's health-check documentation: with service discovery a failed worker is removed, and
	// discovery registers it again once its pod is Ready.
	if f.health != nil && !f.health.remove.anyGiven() {
		f.health.cfg.RemoveUnhealthyWorkers = true
	}
	return nil
}

// config is discovery's part of the server's Config; nil without --service-discovery and
// --router-selector.
func (f *discoveryFlags) config() *kube.Config {
	if !f.enabled && f.routerSel == nil {
		return nil
	}
	c := &kube.Config{RouterSelector: f.routerSel, Namespace: f.namespace}
	if f.enabled {
		c.Selector = f.sel
		c.Rules = kube.Rules{Port: f.port, ModelID: f.modelID}
	}
	return c
}
