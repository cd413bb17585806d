package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// transferCommand is `meshctl workers transfer ID --to NODE`.
func (a *app) transferCommand() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "transfer ID|URL --to NODE",
		Short: "Move a worker's ownership to another gateway (POST /workers/{id}/transfer)",
		Long: "Make gateway NODE the owner of a worker: from then on only NODE probes it and runs its\n" +
			"circuit breaker. The move is one raft entry, fenced on the owner and epoch the raft leader\n" +
			"has, and gives the worker a new epoch; the command returns once every live gateway applied\n" +
			"it. NODE must be an alive peer that is not draining (see meshctl peers). A host-local\n" +
			"worker (ipc://) never moves. Transferring to the owner changes nothing.\n\n" +
			"Exit status: 0 when NODE owns the worker, 1 when the gateway refused (404 peer_not_found,\n" +
			"409 peer_unavailable, 409 host_local, 409 fenced: the owner changed meanwhile, run it again).",
		Example: "  meshctl workers transfer w-3f1c0a9b2d44 --to gw-2\n" +
			"  meshctl workers transfer http://127.0.0.1:8013 --to gw-2 -o json",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("workers transfer: --to NODE is required (usage: %s)", cmd.UseLine())
			}
			body, err := json.Marshal(map[string]string{"to": to})
			if err != nil {
				return err
			}
			return a.recordCall(cmd.Context(), http.MethodPost, workerPath(args[0])+"/transfer", body)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the node id of the gateway that takes the worker")
	return cmd
}

// rebalanceCommand is `meshctl rebalance [--dry-run]`.
func (a *app) rebalanceCommand() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rebalance [--dry-run]",
		Short: "Even out worker ownership across gateways, region by region (POST /mesh/rebalance)",
		Long: "Move the fewest workers needed so that, in each region, the gateways that are alive and\n" +
			"not draining own as many workers as each other, give or take one. A worker of a region\n" +
			"owned by a gateway of another region moves into its region; a region without such a\n" +
			"gateway is left alone, and so are the workers of gateways that are gone (failover moves\n" +
			"them), draining (drain moves them), or suspect or only just joined (they keep theirs\n" +
			"until they settle); host-local workers (ipc://) never move. Every move is fenced on the\n" +
			"owner and epoch the raft leader has; the command returns once every live gateway applied\n" +
			"them. With --dry-run it prints the plan and moves nothing.\n\n" +
			"It prints each move (WORKER, URL, FROM, TO), then how many moved and the owners' counts;\n" +
			"-o wide adds each move's EPOCH (the one the move is fenced on).",
		Example: "  meshctl rebalance --dry-run\n  meshctl rebalance\n  meshctl rebalance -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			body := []byte(`{"dry_run":` + strconv.FormatBool(dryRun) + `}`)
			ans, err := a.call(cmd.Context(), http.MethodPost, "/mesh/rebalance", body)
			if err != nil || a.output == outJSON {
				return err
			}
			var r rebalanceAnswer
			if err := decode("POST /mesh/rebalance", ans.Body, &r); err != nil {
				return err
			}
			return printRebalance(a, r)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and move nothing")
	return cmd
}

// rebalanceAnswer is what POST /mesh/rebalance answers (docs/admin-api.md).
type rebalanceAnswer struct {
	DryRun bool `json:"dry_run"`
	Moves  []struct {
		Worker, URL, From, To string
		Epoch                 uint64
	} `json:"moves"`
	Moved   int `json:"moved"`
	Skipped []struct {
		Worker, Reason string
	} `json:"skipped"`
	Owners map[string]int `json:"owners"`
}

func printRebalance(a *app, r rebalanceAnswer) error {
	if len(r.Moves) > 0 {
		header := []string{"WORKER", "URL", "FROM", "TO"}
		if a.output == outWide {
			header = append(header, "EPOCH")
		}
		t := newTable(a.stdout, header...)
		for _, m := range r.Moves {
			cells := []string{m.Worker, m.URL, m.From, m.To}
			if a.output == outWide {
				cells = append(cells, strconv.FormatUint(m.Epoch, 10))
			}
			t.row(cells...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	var summary string
	switch {
	case len(r.Moves) == 0:
		summary = "balanced: nothing to move"
	case r.DryRun:
		summary = "dry run: " + plural(len(r.Moves), "move") + " planned, nothing moved"
	default:
		summary = fmt.Sprintf("moved %d of %d", r.Moved, len(r.Moves))
		if n := len(r.Skipped); n > 0 {
			summary += fmt.Sprintf("; %d fenced off (%s: %s), run it again", n, r.Skipped[0].Worker, r.Skipped[0].Reason)
		}
	}
	if _, err := fmt.Fprintln(a.stdout, summary); err != nil {
		return err
	}
	_, err := fmt.Fprintln(a.stdout, "owners: "+ownerCounts(r.Owners))
	return err
}

// ownerCounts prints counts as "gw-1=3 gw-2=3", sorted by node id.
func ownerCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, id+"="+strconv.Itoa(m[id]))
	}
	return strings.Join(parts, " ")
}
