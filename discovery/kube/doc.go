// Package kube is Kubernetes service discovery (DESIGN.md section 18): it turns the pods a label
// selector names into the worker records the fleet should have.
//
// One job: pods in, register and remove actions out. Plan is the pure part (pods and the records
// discovery wrote before -> actions); Watcher keeps a fresh view of the pods through client-go's
// informers; Duty is the raft leader's duty that runs both for one term of leadership and hands
// the actions to a Sink, which writes them through the admin API's write path (POST /workers and
// DELETE /workers). Records that discovery writes carry the label LabelSource=SourceKubernetes;
// no other record is ever touched. Peers lists the pods of another selector for the gateways to
// find each other (--router-selector).
package kube
