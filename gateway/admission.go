package gateway

import "sync/atomic"

// admission bounds in-flight model requests. The limit is fixed (--max-connections) or, when
// auto, follows the worker count. Every counter is an atomic so /status reads them lock-free.
type admission struct {
	fixed    int64 // 0: auto
	max      atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
	rejected atomic.Int64
}

func newAdmission(fixed int) *admission {
	a := &admission{fixed: int64(fixed)}
	a.resize(0)
	return a
}

// resize recomputes an auto limit for n workers: 128 per worker, at least 128, at most 4096.
func (a *admission) resize(n int) {
	if a.fixed > 0 {
		a.max.Store(a.fixed)
		return
	}
	a.max.Store(min(max(int64(n)*autoInflightPerWorker, autoInflightPerWorker), autoInflightCap))
}

// full reports whether a new request would be rejected now.
func (a *admission) full() bool { return a.inflight.Load() >= a.max.Load() }

// acquire takes a slot, or counts a rejection and returns false.
func (a *admission) acquire() bool {
	for {
		n := a.inflight.Load()
		if n >= a.max.Load() {
			a.rejected.Add(1)
			return false
		}
		if a.inflight.CompareAndSwap(n, n+1) {
			for p := a.peak.Load(); n+1 > p && !a.peak.CompareAndSwap(p, n+1); p = a.peak.Load() {
			}
			return true
		}
	}
}

func (a *admission) release() { a.inflight.Add(-1) }

// AdmissionStatus is the admission block of GET /status.
type AdmissionStatus struct {
	Inflight      int64 `json:"inflight"`
	MaxInflight   int64 `json:"max_inflight"`
	PeakInflight  int64 `json:"peak_inflight"`
	RejectedTotal int64 `json:"rejected_total"`
	Auto          bool  `json:"auto"`
}

func (a *admission) status() AdmissionStatus {
	return AdmissionStatus{
		Inflight: a.inflight.Load(), MaxInflight: a.max.Load(), PeakInflight: a.peak.Load(),
		RejectedTotal: a.rejected.Load(), Auto: a.fixed == 0,
	}
}
