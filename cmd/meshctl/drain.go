package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// drainProgressEvery is how often `meshctl drain` reads the drain's progress while it waits; a
// variable for tests.
var drainProgressEvery = time.Second

// drainState is one gateway's drain as GET and POST /mesh/drain answer it.
type drainState struct {
	Peer   string `json:"peer"`
	Status string `json:"status"`
	Owned  int    `json:"owned"`
	Stuck  int    `json:"stuck"`
	Leader bool   `json:"leader"`
	Raft   string `json:"raft"`
	Done   bool   `json:"done"`
}

// drainAnswer is what POST /mesh/drain answers (docs/admin-api.md).
type drainAnswer struct {
	Peers  []string     `json:"peers"`
	Moved  int          `json:"moved"`
	Stuck  []string     `json:"stuck"`
	Done   bool         `json:"done"`
	States []drainState `json:"states"`
}

// notDrainedError is a drain the gateway answered before it finished: exit 1.
type notDrainedError struct{ left string }

func (e *notDrainedError) Error() string {
	return "the drain did not finish within the gateway's --drain-timeout-secs; it goes on: " + e.left
}

func (*notDrainedError) fromGateway() {}

// drainCommand is `meshctl drain PEER` and `meshctl drain --color C`.
func (a *app) drainCommand() *cobra.Command {
	var color string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "drain PEER | --color COLOR",
		Short: "Hand a gateway's workers, raft leadership and voter seat to the others, then make it leave (POST /mesh/drain)",
		Long: "Drain gateways before they stop (a blue/green rollout, a host's maintenance): the gateway\n" +
			"PEER, or every alive or suspect gateway whose --color is COLOR. In one raft entry they\n" +
			"are marked draining and their workers move to the gateways that are not, each where a\n" +
			"failover would put it (same region first), carrying its health and circuit breaker\n" +
			"state: a not_ready worker stays not_ready, an open breaker stays open, and the new owner\n" +
			"probes at once. Then the raft leadership moves off them, their voter seats go to\n" +
			"gateways that stay, and they leave the raft configuration and the mesh. A drained\n" +
			"gateway answers /readiness 503 \"draining\" from the start, so a load balancer takes it\n" +
			"out, and serves requests until it is stopped.\n\n" +
			"The command prints the progress (workers left, the leader, the voters) and returns once\n" +
			"everything is handed over, or when the gateway's --drain-timeout-secs ran out, with what\n" +
			"is left: the drain is kept in raft and goes on. Draining every alive gateway is refused.\n\n" +
			"Exit status: 0 when drained, 1 when the gateway refused or the drain did not finish in\n" +
			"time, 2 on a usage error.",
		Example: "  meshctl drain gw-blue-1\n" +
			"  meshctl --gateway http://green-1:30000 drain --color blue\n" +
			"  meshctl drain --color blue -o json",
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]string{}
			switch {
			case cmd.Flags().Changed("color") && color == "":
				return fmt.Errorf("drain: --color: want a color, such as blue (usage: %s)", cmd.UseLine())
			case len(args) == 1 && args[0] == "":
				return fmt.Errorf("drain: PEER: want a gateway's node id (usage: %s)", cmd.UseLine())
			case len(args) == 1 && color != "":
				return fmt.Errorf("drain: name one gateway or --color COLOR, not both (usage: %s)", cmd.UseLine())
			case len(args) == 1:
				body["peer"] = args[0]
			case color != "":
				body["color"] = color
			default:
				return fmt.Errorf("drain: name the gateway to drain, or --color COLOR (usage: %s)", cmd.UseLine())
			}
			if wait <= 0 {
				return fmt.Errorf("drain: --wait %v: want a positive duration", wait)
			}
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			return a.drain(cmd.Context(), b, wait)
		},
	}
	cmd.Flags().StringVar(&color, "color", "", "drain every alive or suspect gateway of this --color (e.g. blue)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long meshctl waits for the gateway's answer (the gateway answers by its --drain-timeout-secs)")
	return cmd
}

// drain sends the drain and, while it waits, prints each change of the progress.
func (a *app) drain(ctx context.Context, body []byte, wait time.Duration) error {
	c := a.client()
	c.timeout, c.http.Timeout = wait, wait
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	progress := make(chan struct{})
	if a.output != outJSON {
		go func() {
			defer close(progress)
			a.printProgress(ctx)
		}()
	} else {
		close(progress)
	}
	ans, err := c.do(ctx, http.MethodPost, "/mesh/drain", body)
	cancel()
	<-progress
	if err != nil {
		return err
	}
	if a.output == outJSON {
		if err := printJSON(a.stdout, ans.Body); err != nil {
			return err
		}
	}
	var r drainAnswer
	if err := decode("POST /mesh/drain", ans.Body, &r); err != nil {
		return err
	}
	if a.output != outJSON {
		if err := printDrain(a, r); err != nil {
			return err
		}
	}
	if !r.Done {
		return &notDrainedError{left: drainLeft(r.States)}
	}
	return nil
}

// printProgress reads GET /mesh/drain every second until ctx ends and prints a line when what
// is left changed.
func (a *app) printProgress(ctx context.Context) {
	t := time.NewTicker(drainProgressEvery)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ans, err := a.client().do(ctx, http.MethodGet, "/mesh/drain", nil)
		if err != nil {
			continue
		}
		var p struct {
			Draining []drainState `json:"draining"`
		}
		if json.Unmarshal(ans.Body, &p) != nil {
			continue
		}
		var raft struct {
			Leader  string `json:"leader"`
			Servers []struct {
				ID, Suffrage string
			} `json:"servers"`
		}
		line := "progress: " + drainLeft(p.Draining)
		if ans, err := a.client().do(ctx, http.MethodGet, "/mesh/raft", nil); err == nil && json.Unmarshal(ans.Body, &raft) == nil {
			var voters []string
			for _, s := range raft.Servers {
				if s.Suffrage == "voter" {
					voters = append(voters, s.ID)
				}
			}
			line += "; leader " + raft.Leader + ", voters " + strings.Join(voters, " ")
		}
		if line != last && ctx.Err() == nil {
			last = line
			fmt.Fprintln(a.stdout, line)
		}
	}
}

// drainLeft says what is left of drains: "gw-1: 2 workers, leader, voter, in the mesh; gw-2: done".
func drainLeft(states []drainState) string {
	if len(states) == 0 {
		return "nothing draining"
	}
	parts := make([]string, 0, len(states))
	for _, s := range states {
		if s.Done {
			parts = append(parts, s.Peer+": done")
			continue
		}
		var left []string
		if s.Owned > 0 {
			w := plural(s.Owned, "worker")
			if s.Stuck > 0 {
				w += fmt.Sprintf(" (%d host-local)", s.Stuck)
			}
			left = append(left, w)
		}
		if s.Leader {
			left = append(left, "leader")
		}
		if s.Raft != "" {
			left = append(left, s.Raft)
		}
		if s.Status == "alive" || s.Status == "suspect" {
			left = append(left, "in the mesh")
		}
		parts = append(parts, s.Peer+": "+strings.Join(left, ", "))
	}
	return strings.Join(parts, "; ")
}

// printDrain prints the drained gateways' table and a summary line.
func printDrain(a *app, r drainAnswer) error {
	t := newTable(a.stdout, "PEER", "STATUS", "OWNED", "LEADER", "RAFT", "DONE")
	for _, s := range r.States {
		raft := s.Raft
		if raft == "" {
			raft = "-"
		}
		t.row(s.Peer, s.Status, fmt.Sprint(s.Owned), fmt.Sprint(s.Leader), raft, fmt.Sprint(s.Done))
	}
	if err := t.flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("drained %s: moved %s", strings.Join(r.Peers, ", "), plural(r.Moved, "worker"))
	if len(r.Stuck) > 0 {
		summary += fmt.Sprintf(", %d cannot move (%s)", len(r.Stuck), strings.Join(r.Stuck, " "))
	}
	if !r.Done {
		summary = fmt.Sprintf("not finished: %s; moved %s", drainLeft(r.States), plural(r.Moved, "worker"))
	}
	_, err := fmt.Fprintln(a.stdout, summary)
	return err
}
