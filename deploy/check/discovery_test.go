package check

import (
	"slices"
	"strings"
	"testing"
)

// TestKubernetesDiscovery checks the discovery overlay as rendered: the gateways run
// --service-discovery with SMG's --selector form, watch their own namespace, mount the
// account's token, and the account may get, list and watch pods there (a Role bound to it in
// that namespace) and nothing more. The base and the green fleet call no API: no token, no Role.
func TestKubernetesDiscovery(t *testing.T) {
	for _, r := range renderAll(t) {
		t.Run(r.name, func(t *testing.T) {
			pod := r.statefulSets[0].Spec.Template.Spec
			args := strings.Join(pod.Containers[0].Args, " ")
			discovery := strings.Contains(args, "--service-discovery ")
			if !strings.HasSuffix(r.name, "/discovery") {
				if discovery || len(r.roles) > 0 || len(r.roleBindings) > 0 || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
					t.Errorf("a fleet without discovery has API access: args %q, %d Roles, %d RoleBindings, token %v", args, len(r.roles), len(r.roleBindings), pod.AutomountServiceAccountToken)
				}
				return
			}
			if !discovery || !strings.Contains(args, "--selector app=sglang") || !strings.Contains(args, "--service-discovery-namespace=$(POD_NAMESPACE)") {
				t.Errorf("args %q: want --service-discovery --selector app=sglang in the pod's namespace", args)
			}
			if pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken {
				t.Error("the pod mounts no service account token: the leader cannot reach the API server")
			}
			if len(r.serviceAccounts) != 1 || r.serviceAccounts[0].AutomountServiceAccountToken == nil || !*r.serviceAccounts[0].AutomountServiceAccountToken ||
				r.serviceAccounts[0].Name != pod.ServiceAccountName {
				t.Fatalf("service accounts %+v; want the pod's, with its token", r.serviceAccounts)
			}
			sa := r.serviceAccounts[0]
			if len(r.roles) != 1 || len(r.roleBindings) != 1 {
				t.Fatalf("%d Roles, %d RoleBindings; want 1 and 1", len(r.roles), len(r.roleBindings))
			}
			role, rb := r.roles[0], r.roleBindings[0]
			if len(role.Rules) != 1 {
				t.Fatalf("role rules %+v; want one", role.Rules)
			}
			rule := role.Rules[0]
			verbs := slices.Clone(rule.Verbs)
			slices.Sort(verbs)
			if !slices.Equal(rule.APIGroups, []string{""}) || !slices.Equal(rule.Resources, []string{"pods"}) || !slices.Equal(verbs, []string{"get", "list", "watch"}) {
				t.Errorf("role rule %+v; want get, list and watch on pods, nothing else", rule)
			}
			if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || rb.RoleRef.APIGroup != "rbac.authorization.k8s.io" {
				t.Errorf("roleRef %+v does not name the Role %s", rb.RoleRef, role.Name)
			}
			if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != sa.Name ||
				rb.Subjects[0].Namespace == "" || rb.Subjects[0].Namespace != sa.Namespace || role.Namespace != sa.Namespace {
				t.Errorf("subjects %+v (role in %q): want the ServiceAccount %s/%s, in the Role's namespace", rb.Subjects, role.Namespace, sa.Namespace, sa.Name)
			}
		})
	}
}
