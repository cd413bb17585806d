// Package loopport hands out ports of 127.0.0.1 for the processes that tests and the chaos
// harness start: each free for TCP and UDP a moment ago (the mesh uses both), drawn below
// Linux's default ephemeral range (so that no listener given port 0 takes one first), and none
// handed out twice by one process.
package loopport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// The range ports are drawn from: below Linux's default ephemeral range.
const (
	Low  = 20000
	High = 32000
)

var given = struct {
	mu    sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Free returns the first of n consecutive free ports (n = 1: one port). A script that numbers
// its ports from a base, such as scripts/demo.sh, takes a run of them.
func Free(n int) (int, error) {
	given.mu.Lock()
	defer given.mu.Unlock()
next:
	for range 1000 {
		base := Low + rand.IntN(High-Low-n)
		for p := base; p < base+n; p++ {
			if given.ports[p] || !portFree(p) {
				continue next
			}
		}
		for p := base; p < base+n; p++ {
			given.ports[p] = true
		}
		return base, nil
	}
	return 0, fmt.Errorf("no %d free consecutive loopback ports in [%d, %d) after 1000 tries", n, Low, High)
}

// portFree reports whether 127.0.0.1:p can be bound for TCP and for UDP.
func portFree(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}
