// Package ctxtime waits on the clock for as long as a context lets it: the one timer-or-done
// select that loops, backoffs and pacing share, as Tailscale's tstime.Sleep is theirs.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends; it returns nil when d passed and ctx's error when ctx
// ended first (at once if it already had). Its timer is stopped either way.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
