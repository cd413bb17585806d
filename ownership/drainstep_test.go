package ownership

import "testing"

// TestNextDrainStep covers every (confirmed, marked, ready) of the drain duty: a mark is
// confirmed before the gateway withdraws its readiness; a gateway that confirmed leaves once
// ready, or at once when its mark is gone (the leader finished its drain while it was cut off);
// one that never confirmed never leaves (resumed after its drain was finished while it was stopped,
// or a gateway started again, whose old mark names another process and reads as no mark).
func TestNextDrainStep(t *testing.T) {
	tests := []struct {
		confirmed, marked, ready bool
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
		if got := nextDrainStep(tt.confirmed, tt.marked, tt.ready); got != tt.want {
			t.Errorf("confirmed %v, marked %v, ready %v: %v, want %v", tt.confirmed, tt.marked, tt.ready, got, tt.want)
		}
	}
}
