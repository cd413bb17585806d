package fakekube

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReadyPod is a Running, Ready pod at ip with labels, created and Ready since at.
func ReadyPod(namespace, name, ip string, lbls map[string]string, at time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: lbls, UID: types.UID("uid-" + namespace + "-" + name),
			CreationTimestamp: metav1.NewTime(at)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}},
	}
}

// SetReady returns a copy of p whose Ready condition is ready since at.
func SetReady(p *corev1.Pod, ready bool, at time.Time) *corev1.Pod {
	p = p.DeepCopy()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = st, metav1.NewTime(at)
			return p
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(at)})
	return p
}

// SetIP returns a copy of p at ip.
func SetIP(p *corev1.Pod, ip string) *corev1.Pod {
	p = p.DeepCopy()
	p.Status.PodIP = ip
	return p
}
