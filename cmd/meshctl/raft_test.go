package main

import "testing"

func TestVotersLine(t *testing.T) {
	tests := []struct {
		name           string
		voters, wanted int
		auto           bool
		want           string
	}{
		{"joined gateways not voters yet", 1, 3, false, "voters 1 of 3: not fault-tolerant (losing one voter stops raft writes)"},
		{"a gateway alone", 1, 1, false, "voters 1 of 1: not fault-tolerant (losing one voter stops raft writes)"},
		{"three voters", 3, 3, false, "voters 3 of 3: fault-tolerant"},
		{"five voters chosen by the fleet's size", 5, 5, true, "voters 5 of 5 (auto): fault-tolerant"},
		{"the automatic count not reached yet", 1, 3, true, "voters 1 of 3 (auto): not fault-tolerant (losing one voter stops raft writes)"},
		{"a gateway too old to say what it wants", 3, 0, false, "voters 3: fault-tolerant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := votersLine(tt.voters, tt.wanted, tt.auto); got != tt.want {
				t.Fatalf("votersLine(%d, %d, %v) = %q; want %q", tt.voters, tt.wanted, tt.auto, got, tt.want)
			}
		})
	}
}
