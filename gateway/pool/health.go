package pool

// Health is a worker's health state as the data plane sees it (DESIGN.md section 6). The health
// package owns the state machine; the pool only stores the verdict and derives the gates from it.
type Health uint32

// Health states. Until health checks run, every registered worker starts ready.
const (
	HealthReady Health = iota
	HealthPending
	HealthNotReady
	HealthFailed
	HealthDraining
)

var healthNames = [...]string{"ready", "pending", "not_ready", "failed", "draining"}

func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return "unknown"
}

// ParseHealth returns the state named s.
func ParseHealth(s string) (Health, bool) {
	for i, n := range healthNames {
		if n == s {
			return Health(i), true
		}
	}
	return 0, false
}
