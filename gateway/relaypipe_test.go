package gateway

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
	"testing/synctest"
)

func TestRelayPipeKeepsOrderAndGathers(t *testing.T) {
	tests := []struct {
		name    string
		pieces  int
		size    int
		lastErr error
	}{
		{"small events", 500, 40, io.EOF},
		{"reads over the pending bound", 40, relayReadSize, io.EOF},
		{"cut after some events", 50, 100, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p relayPipe
			p.open()
			defer p.free()
			var want bytes.Buffer
			pieces := make([][]byte, tt.pieces)
			for i := range pieces {
				b := bytes.Repeat([]byte{byte('a' + i%26)}, tt.size)
				copy(b, strconv.Itoa(i)+":")
				pieces[i] = b
				want.Write(b)
			}
			if tt.lastErr != io.EOF {
				want.Write(sseUpstreamError)
			}
			go func() {
				for i, b := range pieces {
					var err error
					if i == len(pieces)-1 {
						err = tt.lastErr
					}
					if !p.add(b, err) || !p.waitSpace() {
						return
					}
				}
			}()
			var got bytes.Buffer
			takes := 0
			for {
				b, ended := p.take()
				if len(b) > relayBufKeep {
					t.Fatalf("a take of %d bytes: pending outgrew its bound", len(b))
				}
				got.Write(b)
				takes++
				if ended {
					break
				}
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("the writer got %d bytes that differ from the %d read", got.Len(), want.Len())
			}
			if p.cut != (tt.lastErr != io.EOF) {
				t.Errorf("cut = %v after last error %v", p.cut, tt.lastErr)
			}
			if takes > tt.pieces+1 {
				t.Errorf("%d takes for %d reads", takes, tt.pieces)
			}
		})
	}
}

func TestRelayPipeGathersWhatIsPending(t *testing.T) {
	var p relayPipe
	p.open()
	defer p.free()
	for _, ev := range []string{"data: 1\n\n", "data: 2\n\n", "data: 3\n\n"} {
		if !p.add([]byte(ev), nil) {
			t.Fatal("add refused before the end")
		}
	}
	b, ended := p.take()
	if string(b) != "data: 1\n\ndata: 2\n\ndata: 3\n\n" || ended {
		t.Fatalf("take = %q, %v; want the three events at once, not ended", b, ended)
	}
	p.add(nil, io.EOF)
	if b, ended := p.take(); len(b) != 0 || !ended {
		t.Fatalf("take after EOF = %q, %v", b, ended)
	}
	if p.add([]byte("late"), nil) {
		t.Error("add accepted bytes after the end")
	}
}

func TestRelayPipeTakeWaitsForTheReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p relayPipe
		p.open()
		defer p.free()
		got := make(chan string, 1)
		go func() {
			b, _ := p.take()
			got <- string(b)
		}()
		synctest.Wait()
		select {
		case b := <-got:
			t.Fatalf("take returned %q with nothing read", b)
		default:
		}
		p.add([]byte("data: x\n\n"), nil)
		if b := <-got; b != "data: x\n\n" {
			t.Fatalf("take = %q", b)
		}
	})
}

func TestRelayPipeBackpressureAndStop(t *testing.T) {
	tests := []struct {
		name     string
		release  func(p *relayPipe)
		wantMore bool
	}{
		{"the writer takes", func(p *relayPipe) { p.take() }, true},
		{"the writer quits", func(p *relayPipe) {
			if !p.stop() {
				t.Error("stop reported a finished stream while the reader was still reading")
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var p relayPipe
				p.open()
				defer p.free()
				chunk := make([]byte, relayReadSize)
				for range relayMaxPending / relayReadSize {
					p.add(chunk, nil)
				}
				done := make(chan bool, 1)
				go func() { done <- p.waitSpace() }()
				synctest.Wait()
				select {
				case <-done:
					t.Fatal("waitSpace returned with relayMaxPending bytes pending")
				default:
				}
				tt.release(&p)
				if more := <-done; more != tt.wantMore {
					t.Errorf("waitSpace = %v, want %v", more, tt.wantMore)
				}
				if p.add(chunk, nil) != tt.wantMore {
					t.Errorf("add after the release did not report %v", tt.wantMore)
				}
			})
		})
	}
}

func TestRelayPipeStopAfterTheEnd(t *testing.T) {
	var p relayPipe
	p.open()
	defer p.free()
	p.add([]byte("data: [DONE]\n\n"), io.EOF)
	if p.stop() {
		t.Error("stop reported an unfinished stream after EOF")
	}
}

func TestRelayReadFallback(t *testing.T) {
	r := &relay{}
	r.pipe.open()
	defer r.pipe.free()
	want := bytes.Repeat([]byte("data: {\"x\":1}\n\n"), 100)
	go func() {
		for i := 0; i < len(want); i += 64 {
			if !r.pipe.add(want[i:min(i+64, len(want))], nil) || !r.pipe.waitSpace() {
				return
			}
		}
		r.pipe.add(nil, errors.New("reset by peer"))
	}()
	var got bytes.Buffer
	p := make([]byte, 7)
	for {
		n, err := r.Read(p)
		got.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := append(want, sseUpstreamError...); !bytes.Equal(got.Bytes(), w) {
		t.Fatalf("Read returned %d bytes, want the %d relayed and the error event", got.Len(), len(w))
	}
}
