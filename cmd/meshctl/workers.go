package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
)

// workersCommand is `meshctl workers` and its subcommands.
func (a *app) workersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List, register, disable, quarantine, remove and transfer workers",
		Long: "The workers subcommands read and change the fleet's worker records. A worker is named\n" +
			"by its id (w-3f1c0a9b2d44, w-3f1c0a9b2d44@1 for a data-parallel rank) or by its URL.",
		Example: "  meshctl workers list\n  meshctl workers disable http://127.0.0.1:8013 --reason maintenance",
		Args:    groupArgs,
		RunE:    needSubcommand,
	}
	cmd.AddCommand(a.listCommand(), a.getCommand(), a.addCommand(), a.removeCommand(), a.transferCommand())
	for _, f := range flagCommands {
		cmd.AddCommand(a.flagCommand(f))
	}
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	var model, by string
	cmd := &cobra.Command{
		Use:   "list [--model M]",
		Short: "List the workers (GET /workers)",
		Long: "List the fleet's workers, sorted by name (host:port), then URL (--sort COLUMN orders by\n" +
			"another column). With --model, only the workers serving that model (or declaring none,\n" +
			"which serve any). FLAGS shows disabled and dead (quarantined). CACHE_HIT is the share of\n" +
			"the worker's prompt tokens its engine reported served from its prefix cache, in the\n" +
			"answers the answering gateway relayed (- before any report); -o wide adds the token\n" +
			"counts. A summary line follows: how many are routable, and why the others are not.",
		Example: "  meshctl workers list\n  meshctl workers list --model llama-3 -o wide\n  meshctl workers list --sort health\n  meshctl workers list -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSort(cmd, by, workersHeader(true)); err != nil {
				return err
			}
			path := "/workers"
			if model != "" {
				path += "?model=" + url.QueryEscape(model)
			}
			ans, err := a.call(cmd.Context(), http.MethodGet, path, nil)
			if err != nil || a.output == outJSON {
				return err
			}
			var list struct {
				Workers []record `json:"workers"`
			}
			if err := decode("GET /workers", ans.Body, &list); err != nil {
				return err
			}
			if err := printWorkers(a.stdout, list.Workers, a.output == outWide, by); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, workersSummary(list.Workers))
			return err
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "only the workers serving this model")
	sortFlag(cmd, &by, workersHeader(true), "by name, then URL")
	return cmd
}

func (a *app) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID|URL",
		Short: "Describe one worker: every field, its breaker, last error and transitions (GET /workers/{id})",
		Long: "Describe one worker, as kubectl describe does: its identity, owner, health, flags, spec,\n" +
			"its circuit breaker, the last error of its probes, its overrides, and its recent health\n" +
			"and breaker transitions (kept by its owner: ask the owning gateway to see them), then\n" +
			"every other field the gateway answers.",
		Example: "  meshctl workers get w-3f1c0a9b2d44\n  meshctl workers get http://127.0.0.1:8013 -o json",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := workerPath(args[0])
			ans, err := a.call(cmd.Context(), http.MethodGet, path, nil)
			if err != nil || a.output == outJSON {
				return err
			}
			return describeWorker(a.stdout, "GET "+path, ans.Body)
		},
	}
}

// recordCall sends a request answered by one worker record and prints it.
func (a *app) recordCall(ctx context.Context, method, path string, body []byte) error {
	ans, err := a.call(ctx, method, path, body)
	if err != nil || a.output == outJSON {
		return err
	}
	var r record
	if err := decode(method+" "+path, ans.Body, &r); err != nil {
		return err
	}
	return printWorkers(a.stdout, []record{r}, a.output == outWide, "")
}

// flagCommand is one flag switch: a PUT with a flags-only body.
type flagCommand struct {
	name, short, long, example string
	field                      string // disabled or is_dead
	value                      bool
	reason                     bool // takes --reason
}

var flagCommands = []flagCommand{
	{name: "disable", field: "disabled", value: true, reason: true,
		short: "Stop routing to a worker; health keeps probing it (PUT {\"disabled\": true})",
		long: "Disable a worker: it takes no new requests (in-flight ones finish) and its health keeps\n" +
			"being probed. The flag lives in raft: it survives restarts. Disabling it again is no change.",
		example: "  meshctl workers disable w-3f1c0a9b2d44 --reason maintenance"},
	{name: "enable", field: "disabled", value: false,
		short:   "Route to a disabled worker again (PUT {\"disabled\": false})",
		long:    "Enable a worker: clear its disabled flag (and the reason, who and when).",
		example: "  meshctl workers enable http://127.0.0.1:8013"},
	{name: "quarantine", field: "is_dead", value: true,
		short:   "Quarantine a worker: no traffic and no probes (PUT {\"is_dead\": true})",
		long:    "Quarantine a worker (is_dead): it takes no traffic and health checks skip it.",
		example: "  meshctl workers quarantine w-3f1c0a9b2d44"},
	{name: "unquarantine", field: "is_dead", value: false,
		short:   "Lift a worker's quarantine (PUT {\"is_dead\": false})",
		long:    "Lift a worker's quarantine (is_dead false): health probes it again.",
		example: "  meshctl workers unquarantine w-3f1c0a9b2d44"},
}

func (a *app) flagCommand(f flagCommand) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     f.name + " ID|URL",
		Short:   f.short,
		Long:    f.long,
		Example: f.example,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{f.field: f.value}
			if reason != "" {
				body["reason"] = reason
			}
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			return a.recordCall(cmd.Context(), http.MethodPut, workerPath(args[0]), b)
		},
	}
	if f.reason {
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded with the flag")
	}
	return cmd
}

func (a *app) removeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID|URL",
		Short: "Drain, then remove a worker (DELETE /workers/{id})",
		Long: "Remove a worker. A ready worker that is not quarantined and has a drain settle time\n" +
			"above 0 (health.drain_settle_secs, else the gateway's --drain-settle-secs) is drained\n" +
			"first (STATUS draining): its record enters draining through raft, no gateway starts a new\n" +
			"request to it, in-flight ones finish, and after its drain settle time its owner removes\n" +
			"the record, across the owner's restarts and failovers too. Otherwise the record is\n" +
			"removed at once (STATUS removed).\n" +
			"Run `meshctl workers get` until it answers 404 worker_not_found to see the removal.",
		Example: "  meshctl workers remove http://127.0.0.1:8013",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := workerPath(args[0])
			ans, err := a.call(cmd.Context(), http.MethodDelete, path, nil)
			if err != nil || a.output == outJSON {
				return err
			}
			var r struct {
				ID              string  `json:"id"`
				Status          string  `json:"status"`
				DrainSettleSecs float64 `json:"drain_settle_secs"`
			}
			if err := decode("DELETE "+path, ans.Body, &r); err != nil {
				return err
			}
			t := newTable(a.stdout, "ID", "STATUS", "DRAIN_SETTLE")
			t.row(r.ID, r.Status, strconv.FormatFloat(r.DrainSettleSecs, 'f', -1, 64)+"s")
			return t.flush()
		},
	}
}
