package ctxtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), 3*time.Second); err != nil || time.Since(start) != 3*time.Second {
			t.Errorf("Sleep(3s) = %v after %v, want nil after 3s", err, time.Since(start))
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) under a 1 s deadline = %v after %v, want the deadline's error after 1s", err, time.Since(start))
		}

		done, stop := context.WithCancel(t.Context())
		stop()
		if err := Sleep(done, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep on an ended context = %v, want its error even for 0", err)
		}
	})
}
