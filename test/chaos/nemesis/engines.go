package nemesis

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/meshgw/meshgw/test/chaos/workload"
)

// engineFault makes engine flap, hang or fail its weight updates for p.hold. A flap and a hang,
// which reach model requests, are recorded with their interval, for the classification of lost
// requests.
func (n *Nemesis) engineFault(ctx context.Context, p plan, engine string) {
	n.say("%s on %s for %v", p.kind, engine, p.hold.Round(time.Millisecond))
	n.count(p.kind)
	if p.kind == EngineFlap || p.kind == EngineHang {
		from := n.Rec.Now()
		defer n.Rec.EngineFault(workload.NewWorker(engine).ID, p.kind, from)
	}
	switch p.kind {
	case EngineFlap:
		// Down and up again a few times within the hold.
		for j := 0; j < 4 && ctx.Err() == nil; j++ {
			n.fault(engine, `{"health_status":503,"error_status":503,"error_rate":1}`)
			wait(ctx, p.hold/8)
			n.fault(engine, `{}`)
			wait(ctx, p.hold/8)
		}
	case EngineHang:
		n.fault(engine, `{"hang":true}`)
		wait(ctx, p.hold)
		n.fault(engine, `{}`)
	case WeightFail:
		n.fault(engine, `{"weight_update_status":500}`)
		wait(ctx, p.hold)
		n.fault(engine, `{}`)
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
