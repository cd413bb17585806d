package ownership

// drainStep is what the drain duty does next.
type drainStep uint8

const (
	// drainWait: nothing to do until the applied state changes.
	drainWait drainStep = iota
	// drainConfirm: the applied state marks this process draining; confirm it at the leader's
	// commit index, then withdraw readiness (503 draining).
	drainConfirm
	// drainLeave: confirmed, and nothing left that the gateways that stay can take: leave.
	drainLeave
	// drainLeaveUnmarked: confirmed, and the mark is gone before this process left: the leader
	// saw it gone (cut off) and finished its drain. It leaves all the same.
	drainLeaveUnmarked
)

// String names the step for the logs and the tests.
func (s drainStep) String() string {
	switch s {
	case drainWait:
		return "wait"
	case drainConfirm:
		return "confirm"
	case drainLeave:
		return "leave"
	case drainLeaveUnmarked:
		return "leave-unmarked"
	}
	return "unknown"
}

// nextDrainStep is the drain duty's decision: confirmed says this process confirmed its mark
// and withdrew its readiness, marked that the applied state marks it, ready that it owns only what
// cannot move, does not lead and holds no voter seat. A process that never confirmed a mark never
// leaves: one resumed after its drain was finished while it was stopped joins as a new member.
func nextDrainStep(confirmed, marked, ready bool) drainStep {
	switch {
	case !confirmed && marked:
		return drainConfirm
	case confirmed && !marked:
		return drainLeaveUnmarked
	case confirmed && ready:
		return drainLeave
	}
	return drainWait
}
