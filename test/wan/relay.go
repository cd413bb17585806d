package wan

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// linkQueue bounds the packets one direction of a link holds in flight. At 50 ms and 1,500-byte
// packets it is 60 MB/s per direction, far above what the tests send; a packet beyond it is
// dropped and counted, as a router's full queue drops it.
const linkQueue = 2048

// packet is one IP packet in flight on a link, due at its far end at due.
type packet struct {
	b   []byte
	due time.Time
}

// relay moves IP packets between the regions' TUN devices: a packet read from region i's
// device whose destination is in region j waits the link's one-way delay, then is written to
// region j's device. Each direction of each link is a FIFO with its own goroutine, so packets
// of one direction keep their order, as on a real link, and a slow direction holds up no
// other.
type relay struct {
	tuns   []*os.File
	links  [][]chan packet // links[i][j]: from region i to region j
	delays [][]atomic.Int64
	cut    []atomic.Bool // a cut region's packets, in or out, are dropped

	forwarded, dropped atomic.Uint64
	bufs               sync.Pool
	wg                 sync.WaitGroup
	done               chan struct{}
}

func newRelay(tuns []*os.File, delay time.Duration) *relay {
	n := len(tuns)
	r := &relay{tuns: tuns, links: make([][]chan packet, n), delays: make([][]atomic.Int64, n),
		cut: make([]atomic.Bool, n), done: make(chan struct{})}
	r.bufs.New = func() any { b := make([]byte, 65536); return &b }
	for i := range n {
		r.links[i] = make([]chan packet, n)
		r.delays[i] = make([]atomic.Int64, n)
		for j := range n {
			if i == j {
				continue
			}
			r.links[i][j] = make(chan packet, linkQueue)
			r.delays[i][j].Store(int64(delay))
		}
	}
	return r
}

// start runs a reader per region and a sender per direction of each link.
func (r *relay) start() {
	for i := range r.tuns {
		r.wg.Add(1)
		go r.read(i)
		for j := range r.tuns {
			if i != j {
				r.wg.Add(1)
				go r.send(r.links[i][j], r.tuns[j])
			}
		}
	}
}

// stop closes the devices, which ends the readers, and the done channel, which ends the
// senders; it returns when all have.
func (r *relay) stop() {
	for _, t := range r.tuns {
		_ = t.Close()
	}
	close(r.done)
	r.wg.Wait()
}

// read forwards what region i sends to the other regions.
func (r *relay) read(i int) {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := r.tuns[i].Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			continue // a transient error of one packet
		}
		j, ok := r.regionOf(buf[:n])
		if !ok || j == i || r.cut[i].Load() || r.cut[j].Load() {
			r.dropped.Add(1)
			continue
		}
		b := r.bufs.Get().(*[]byte)
		p := packet{b: append((*b)[:0], buf[:n]...), due: time.Now().Add(time.Duration(r.delays[i][j].Load()))}
		select {
		case r.links[i][j] <- p:
		default:
			r.dropped.Add(1)
			r.bufs.Put(b)
		}
	}
}

// send writes the packets of one direction to their far end, each when it is due.
func (r *relay) send(link <-chan packet, to *os.File) {
	defer r.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var p packet
		select {
		case p = <-link:
		case <-r.done:
			return
		}
		if wait := time.Until(p.due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-r.done:
				return
			}
		}
		if _, err := to.Write(p.b); err == nil {
			r.forwarded.Add(1)
		} else {
			r.dropped.Add(1)
		}
		b := p.b
		r.bufs.Put(&b)
	}
}

// regionOf is the region an IPv4 packet is addressed to: the third byte of 10.78.R.H, less one.
// Anything else (IPv6, another network) has no region.
func (r *relay) regionOf(p []byte) (int, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[16] != netA || p[17] != netB {
		return 0, false
	}
	j := int(p[18]) - 1
	return j, j >= 0 && j < len(r.tuns)
}
