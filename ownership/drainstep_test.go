package ownership

import "testing"

// TestNextDrainStep covers every (handed off, marked, ready) of the drain duty: a mark is
// confirmed before the gateway hands off; a gateway that handed off leaves once ready, or at once
// when its mark is gone (the leader finished its drain while it was cut off); one that never
// handed off never leaves (resumed after its drain was finished while it was stopped, or a
// gateway started again, whose old mark names another process and reads as no mark).
func TestNextDrainStep(t *testing.T) {
	tests := []struct {
		handedOff, marked, ready bool
		want                     drainStep
	}{
		{false, false, false, drainWait},
		{false, false, true, drainWait},
		{false, true, false, drainConfirm},
		{false, true, true, drainConfirm},
		{true, true, false, drainWait},
		{true, true, true, drainLeave},
		{true, false, false, drainLeaveUnmarked},
		{true, false, true, drainLeaveUnmarked},
	}
	for _, tt := range tests {
		if got := nextDrainStep(tt.handedOff, tt.marked, tt.ready); got != tt.want {
			t.Errorf("handed off %v, marked %v, ready %v: %v, want %v", tt.handedOff, tt.marked, tt.ready, got, tt.want)
		}
	}
}
