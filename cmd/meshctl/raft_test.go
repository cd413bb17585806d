package main

import "testing"

func TestVotersLine(t *testing.T) {
	tests := []struct {
		name           string
		voters, wanted int
		want           string
	}{
		{"joined gateways not voters yet", 1, 3, "voters 1 of 3: not fault-tolerant (losing one voter stops raft writes)"},
		{"a gateway alone", 1, 1, "voters 1 of 1: not fault-tolerant (losing one voter stops raft writes)"},
		{"three voters", 3, 3, "voters 3 of 3: fault-tolerant"},
		{"a gateway too old to say what it wants", 3, 0, "voters 3: fault-tolerant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := votersLine(tt.voters, tt.wanted); got != tt.want {
				t.Fatalf("votersLine(%d, %d) = %q; want %q", tt.voters, tt.wanted, got, tt.want)
			}
		})
	}
}
