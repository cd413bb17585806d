package nemesis

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

func (n *Nemesis) engineLoop(ctx context.Context, rng *rand.Rand, kinds []string) {
	for i := 0; i < 100000 && ctx.Err() == nil; i++ {
		k := kinds[rng.IntN(len(kinds))]
		d := hold(rng, n.Hold)
		engine := n.C.Engines[rng.IntN(len(n.C.Engines))].URL()
		if k == WeightFail {
			engine = n.WeightEngine
		}
		n.Log("nemesis: %s on %s for %v", k, engine, d.Round(time.Millisecond))
		n.count(k)
		switch k {
		case EngineFlap:
			// Down and up again a few times within the hold.
			for j := 0; j < 4 && ctx.Err() == nil; j++ {
				n.fault(engine, `{"health_status":503,"error_status":503,"error_rate":1}`)
				wait(ctx, d/8)
				n.fault(engine, `{}`)
				wait(ctx, d/8)
			}
		case EngineHang:
			n.fault(engine, `{"hang":true}`)
			wait(ctx, d)
			n.fault(engine, `{}`)
		case WeightFail:
			n.fault(engine, `{"weight_update_status":500}`)
			wait(ctx, d)
			n.fault(engine, `{}`)
		}
		wait(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond)
	}
}

// fault posts body to the engine's /_fault.
func (n *Nemesis) fault(engine, body string) {
	resp, err := faultClient.Post(engine+"/_fault", "application/json", strings.NewReader(body))
	if err != nil {
		n.fail("POST %s/_fault: %v", engine, err)
		return
	}
	resp.Body.Close()
}

var faultClient = &http.Client{Timeout: 5 * time.Second}
