package check

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// rendered is one kustomization built by kustomize and decoded into the Kubernetes API's types.
type rendered struct {
	name            string
	statefulSets    []appsv1.StatefulSet
	services        []corev1.Service
	pdbs            []policyv1.PodDisruptionBudget
	serviceMonitors []monitoringv1.ServiceMonitor
	serviceAccounts []corev1.ServiceAccount
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
}

// kustomizations are the folders rendered: the base (the blue fleet) and each overlay.
var kustomizations = []string{"deploy/kubernetes/base", "deploy/kubernetes/overlays/green", "deploy/kubernetes/overlays/discovery"}

var (
	renderOnce sync.Once
	renders    []rendered
	renderErr  error
)

// renderAll builds every kustomization with kustomize's library (what kubectl apply -k runs) and
// decodes each object strictly into its API type (sigs.k8s.io/yaml's UnmarshalStrict): a field
// the API does not have, or a value of the wrong type, fails, as the API server's schema
// validation would refuse it.
func renderAll(t *testing.T) []rendered {
	t.Helper()
	renderOnce.Do(func() {
		for _, k := range kustomizations {
			r, err := render(k)
			if err != nil {
				renderErr = fmt.Errorf("%s: %w", k, err)
				return
			}
			renders = append(renders, r)
		}
	})
	if renderErr != nil {
		t.Fatal(renderErr)
	}
	return renders
}

func render(dir string) (rendered, error) {
	out := rendered{name: dir}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), repoPath(dir))
	if err != nil {
		return out, fmt.Errorf("kustomize: %w", err)
	}
	for _, res := range m.Resources() {
		b, err := res.AsYAML()
		if err != nil {
			return out, err
		}
		kind := res.GetKind()
		var target any
		switch kind {
		case "StatefulSet":
			out.statefulSets = append(out.statefulSets, appsv1.StatefulSet{})
			target = &out.statefulSets[len(out.statefulSets)-1]
		case "Service":
			out.services = append(out.services, corev1.Service{})
			target = &out.services[len(out.services)-1]
		case "PodDisruptionBudget":
			out.pdbs = append(out.pdbs, policyv1.PodDisruptionBudget{})
			target = &out.pdbs[len(out.pdbs)-1]
		case "ServiceMonitor":
			out.serviceMonitors = append(out.serviceMonitors, monitoringv1.ServiceMonitor{})
			target = &out.serviceMonitors[len(out.serviceMonitors)-1]
		case "ServiceAccount":
			out.serviceAccounts = append(out.serviceAccounts, corev1.ServiceAccount{})
			target = &out.serviceAccounts[len(out.serviceAccounts)-1]
		case "Role":
			out.roles = append(out.roles, rbacv1.Role{})
			target = &out.roles[len(out.roles)-1]
		case "RoleBinding":
			out.roleBindings = append(out.roleBindings, rbacv1.RoleBinding{})
			target = &out.roleBindings[len(out.roleBindings)-1]
		default:
			return out, fmt.Errorf("%s %s: a kind this check does not know; add its API type", kind, res.GetName())
		}
		if err := yaml.UnmarshalStrict(b, target); err != nil {
			return out, fmt.Errorf("%s %s does not match the API's schema: %w", kind, res.GetName(), err)
		}
	}
	return out, nil
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestKubernetesManifests checks each rendered fleet: a StatefulSet of three with a volume on
// the state directory, a headless Service that lists pods before they are ready (for --join by
// DNS) and a client Service, a disruption budget that keeps quorum, probes on
// --health-check-port, a preStop hook with --leave-on-terminate, TLS from a Secret, and a
// ServiceMonitor on the metrics port.
func TestKubernetesManifests(t *testing.T) {
	for _, r := range renderAll(t) {
		t.Run(r.name, func(t *testing.T) {
			if len(r.statefulSets) != 1 || len(r.pdbs) != 1 || len(r.serviceMonitors) != 1 || len(r.services) != 2 {
				t.Fatalf("%d StatefulSets, %d PodDisruptionBudgets, %d ServiceMonitors, %d Services; want 1, 1, 1, 2",
					len(r.statefulSets), len(r.pdbs), len(r.serviceMonitors), len(r.services))
			}
			sts := r.statefulSets[0]
			checkStatefulSet(t, r, sts)
			pods := labels.Set(sts.Spec.Template.Labels)
			for _, svc := range r.services {
				if !labels.SelectorFromSet(svc.Spec.Selector).Matches(pods) || len(svc.Spec.Selector) == 0 {
					t.Errorf("Service %s selects %v, not the pods %v", svc.Name, svc.Spec.Selector, pods)
				}
			}
			pdb := r.pdbs[0]
			sel, err := metav1Selector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(pods) {
				t.Errorf("PodDisruptionBudget %s selects %v, not the pods", pdb.Name, pdb.Spec.Selector)
			}
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget maxUnavailable %v; want 1 (three voters keep quorum with one away)", pdb.Spec.MaxUnavailable)
			}
			sm := r.serviceMonitors[0]
			var scraped *corev1.Service
			for i, svc := range r.services {
				if s, err := metav1Selector(&sm.Spec.Selector); err == nil && s.Matches(labels.Set(svc.Labels)) {
					scraped = &r.services[i]
				}
			}
			if scraped == nil || len(sm.Spec.Endpoints) == 0 || !servicePort(scraped, sm.Spec.Endpoints[0].Port) {
				t.Errorf("ServiceMonitor %s scrapes no Service port (selector %v)", sm.Name, sm.Spec.Selector)
			}
		})
	}
}

func checkStatefulSet(t *testing.T, r rendered, sts appsv1.StatefulSet) {
	t.Helper()
	spec := sts.Spec
	if spec.Replicas == nil || *spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", spec.Replicas)
	}
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q; want Parallel (--bootstrap-expect needs all three, and a pod without workers is not ready)", spec.PodManagementPolicy)
	}
	sel, err := metav1Selector(spec.Selector)
	if err != nil || !sel.Matches(labels.Set(spec.Template.Labels)) {
		t.Errorf("selector %v does not match the pod template's labels %v", spec.Selector, spec.Template.Labels)
	}
	var headless *corev1.Service
	for i, svc := range r.services {
		if svc.Name == spec.ServiceName {
			headless = &r.services[i]
		}
	}
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("serviceName %s: want a headless Service with publishNotReadyAddresses", spec.ServiceName)
	}
	pod := spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("the pod does not run as nonroot")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := containerEnv(c)
	defined := map[string]bool{}
	for _, e := range c.Env {
		for _, m := range envRef.FindAllStringSubmatch(e.Value, -1) {
			if !defined[m[1]] {
				t.Errorf("env %s refers to $(%s), which no earlier variable defines: Kubernetes leaves it as is", e.Name, m[1])
			}
		}
		defined[e.Name] = true
	}
	mounts := map[string]string{} // mount path → volume
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	var stateClaim bool
	for _, pvc := range spec.VolumeClaimTemplates {
		if mounts[env["MESHGW_STATE_DIR"]] == pvc.Name {
			stateClaim = true
		}
	}
	if !stateClaim {
		t.Errorf("MESHGW_STATE_DIR %q is not on a volumeClaimTemplate", env["MESHGW_STATE_DIR"])
	}
	secrets := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = true
		}
	}
	for _, k := range []string{"MESHGW_TLS_CERT", "MESHGW_TLS_KEY", "MESHGW_TLS_CA", "MESHGW_ADMIN_API_KEY_FILE", "MESHGW_MESH_ENCRYPT_KEY_FILE"} {
		f := env[k]
		dir := f[:max(strings.LastIndex(f, "/"), 0)]
		if f == "" || !secrets[mounts[dir]] {
			t.Errorf("%s=%q is not a file of a mounted Secret", k, f)
		}
	}
	if env["MESHGW_INSECURE"] != "" || strings.Contains(strings.Join(c.Args, " "), "--insecure") {
		t.Error("the manifests run --insecure; they take TLS from the Secret")
	}
	healthPort := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--health-check-port="); ok {
			healthPort = v
		}
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		if probe.HTTPGet.Path != "/"+name {
			t.Errorf("%s probe path %s, want /%s", name, probe.HTTPGet.Path, name)
		}
		if port := ports[probe.HTTPGet.Port.String()]; healthPort == "" || port != healthPort {
			t.Errorf("%s probe on port %s (%s); want --health-check-port %q", name, probe.HTTPGet.Port.String(), port, healthPort)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		t.Error("no preStop hook")
	}
	if env["MESHGW_LEAVE_ON_TERMINATE"] != "true" {
		t.Error("MESHGW_LEAVE_ON_TERMINATE is not true: SIGTERM would keep ownership instead of handing it over")
	}
	if !strings.Contains(env["MESHGW_JOIN"], spec.ServiceName+".") {
		t.Errorf("MESHGW_JOIN %q does not name the headless Service %s", env["MESHGW_JOIN"], spec.ServiceName)
	}
	if !strings.Contains(env["MESHGW_MESH_ADVERTISE_HOST"], "."+spec.ServiceName+".") {
		t.Errorf("MESHGW_MESH_ADVERTISE_HOST %q is not the pod's name under %s", env["MESHGW_MESH_ADVERTISE_HOST"], spec.ServiceName)
	}
}

func servicePort(svc *corev1.Service, name string) bool {
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}
