package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// ownersPath is the route meshctl owners reads.
const ownersPath = "/mesh/owners"

// ownersHeader are the columns of meshctl owners.
var ownersHeader = []string{"WORKER", "URL", "OWNER", "EPOCH", "HEALTH", "BREAKER", "FLAGS", "STALE", "CACHE_HIT"}

// ownersSortable are the columns --sort takes: REGION, shown when a worker has one, and those
// -o wide shows too.
var ownersSortable = slices.Concat(ownersHeader, []string{"REGION", "ORIGIN"})

func (a *app) ownersCommand() *cobra.Command {
	var owner, by string
	cmd := &cobra.Command{
		Use:   "owners [--owner NODE]",
		Short: "List which gateway owns each worker, at which epoch (GET /mesh/owners)",
		Long: "List every worker record with the gateway that owns it (GET /mesh/owners), as the\n" +
			"answering gateway sees them, sorted by URL, then worker (--sort COLUMN orders by another\n" +
			"column), with a summary line: how many each gateway owns, and how many are stale. The\n" +
			"owner alone probes a worker, runs its circuit breaker and may remove it, and tells the\n" +
			"other gateways the worker's state in its bulletins; EPOCH is the raft index of the\n" +
			"worker's last ownership change (the fencing token).\n\n" +
			"HEALTH is the health state the answering gateway shows: its own probes' for a worker it\n" +
			"owns, the owner's, from its bulletins, for the others (unknown before the first one).\n" +
			"BREAKER is the circuit breaker's state (closed, open, half_open): the answering\n" +
			"gateway's own for a worker it owns, the owner's, from its bulletins, for the others;\n" +
			"unknown before the owner's first bulletin, or for a worker the answering gateway owns\n" +
			"but has not started running yet. FLAGS shows disabled and dead (quarantined), - when\n" +
			"neither. STALE is true when the state imported from the owner's bulletins was not\n" +
			"refreshed for 3 × the worker's probe interval (at least 3s): the owner is paused,\n" +
			"partitioned or gone, and the state keeps its last value meanwhile; always false for a\n" +
			"worker the answering gateway owns. CACHE_HIT is the share of the worker's prompt tokens\n" +
			"its engine reported served from its prefix cache, in the answers the answering gateway\n" +
			"relayed (- before any report; other gateways' traffic is not in it). REGION, shown when\n" +
			"a worker has one, is the worker's region; in a fleet of several regions the rows are\n" +
			"sorted by region first, and the summary counts the workers of each region.\n\n" +
			"--owner NODE keeps the rows of the workers NODE owns (also with -o json, which then\n" +
			"prints the gateway's answer with only those rows). -o wide adds ORIGIN (local when the\n" +
			"answering gateway owns the worker, mesh otherwise) and a column for each field the\n" +
			"gateway answers beyond these.",
		Example: "  meshctl owners\n  meshctl owners --owner gw-3\n  meshctl owners -o wide\n  meshctl owners -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("owner") && owner == "" {
				return fmt.Errorf("owners: --owner: want a gateway's node id (see meshctl owners --help)")
			}
			if err := checkSort(cmd, by, ownersSortable); err != nil {
				return err
			}
			return a.owners(cmd.Context(), owner, by)
		},
	}
	sortFlag(cmd, &by, ownersSortable, "by URL, then worker (by region first in a fleet of several regions)")
	cmd.Flags().StringVar(&owner, "owner", "", "only the workers the gateway with node id `NODE` owns")
	return cmd
}

// owners runs meshctl owners: it reads the route and prints the rows of owner ("" for all),
// sorted by the column by ("" for the default order).
func (a *app) owners(ctx context.Context, owner, by string) error {
	if a.output == outJSON && owner != "" {
		ans, err := a.client().do(ctx, http.MethodGet, ownersPath, nil)
		if err != nil {
			return err
		}
		body, err := filterOwnersJSON(ans.Body, owner)
		if err != nil {
			return err
		}
		return printJSON(a.stdout, body)
	}
	ans, err := a.call(ctx, http.MethodGet, ownersPath, nil)
	if err != nil || a.output == outJSON {
		return err
	}
	var list struct {
		Owners []json.RawMessage `json:"owners"`
	}
	if err := decode("GET "+ownersPath, ans.Body, &list); err != nil {
		return err
	}
	rows := make([]ownerRow, 0, len(list.Owners))
	for _, raw := range list.Owners {
		var r ownerRow
		if r.extra, err = readRow("GET "+ownersPath, raw, &r, ownerColumns); err != nil {
			return err
		}
		if owner == "" || r.Owner == owner {
			rows = append(rows, r)
		}
	}
	return printOwners(a.stdout, rows, a.output == outWide, by)
}

// filterOwnersJSON keeps, in the route's answer, only the rows owner owns; every row kept and
// every other field of the answer stay as the gateway sent them.
func filterOwnersJSON(body []byte, owner string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := decode("GET "+ownersPath, body, &top); err != nil {
		return nil, err
	}
	var rows []json.RawMessage
	if raw, ok := top["owners"]; ok {
		if err := decode("GET "+ownersPath, raw, &rows); err != nil {
			return nil, err
		}
	}
	kept := []json.RawMessage{}
	for _, raw := range rows {
		var r struct {
			Owner string `json:"owner"`
		}
		if err := decode("GET "+ownersPath, raw, &r); err != nil {
			return nil, err
		}
		if r.Owner == owner {
			kept = append(kept, raw)
		}
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return nil, &badAnswerError{What: "GET " + ownersPath, Err: err}
	}
	top["owners"] = out
	b, err := json.Marshal(top)
	if err != nil {
		return nil, &badAnswerError{What: "GET " + ownersPath, Err: err}
	}
	return b, nil
}

// ownerRow is one row of GET /mesh/owners: the fields the table shows, and the others as the
// gateway answered them, flattened (FIELD.SUB) for -o wide.
type ownerRow struct {
	Worker      string      `json:"worker"`
	URL         string      `json:"url"`
	Owner       string      `json:"owner"`
	Region      string      `json:"region"`
	Epoch       uint64      `json:"epoch"`
	HealthState string      `json:"health_state"`
	Breaker     string      `json:"breaker"`
	Disabled    bool        `json:"disabled"`
	IsDead      bool        `json:"is_dead"`
	Stale       bool        `json:"stale"`
	Origin      string      `json:"origin"`
	Cache       *cacheStats `json:"cache"`

	extra map[string]string
}

// ownerColumns are the fields ownerRow shows in its own columns.
var ownerColumns = map[string]bool{
	"worker": true, "url": true, "owner": true, "region": true, "epoch": true, "health_state": true, "breaker": true,
	"disabled": true, "is_dead": true, "stale": true, "origin": true, "cache": true,
}

// flags names the operator's switches that are on: disabled, dead.
func (r ownerRow) flags() string {
	return record{Disabled: r.Disabled, IsDead: r.IsDead}.flags()
}

// printOwners prints the owners table, sorted by URL then worker id (or by the column by, shown
// or not), and its summary line; wide adds ORIGIN and the fields the table does not know, one
// column each, in name order.
func printOwners(w io.Writer, rows []ownerRow, wide bool, by string) error {
	header := slices.Clone(ownersHeader)
	slices.SortStableFunc(rows, func(a, b ownerRow) int {
		if c := strings.Compare(a.URL, b.URL); c != 0 {
			return c
		}
		return strings.Compare(a.Worker, b.Worker)
	})
	byRegionFirst(rows, ownerRegion)
	regional := slices.ContainsFunc(rows, func(r ownerRow) bool { return r.Region != "" })
	if regional { // REGION after OWNER, only when a worker has one
		header = slices.Insert(header, 3, "REGION")
	}
	shown := len(header) // the columns without wide
	extra := extraColumns(rows, func(r ownerRow) map[string]string { return r.extra })
	header = append(header, "ORIGIN")
	for _, k := range extra {
		header = append(header, strings.ToUpper(k))
	}
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		row := []string{r.Worker, r.URL, r.Owner, strconv.FormatUint(r.Epoch, 10), r.HealthState, r.Breaker,
			r.flags(), strconv.FormatBool(r.Stale), r.Cache.hit()}
		if regional {
			row = slices.Insert(row, 3, cmp.Or(r.Region, "-"))
		}
		row = append(row, r.Origin)
		for _, k := range extra {
			row = append(row, r.extra[k])
		}
		cells = append(cells, row)
	}
	sortRows(header, cells, by) // by any column, shown or not
	if !wide {
		header = header[:shown]
	}
	t := newTable(w, header...)
	for _, r := range cells {
		t.row(r[:len(header)]...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, ownersSummary(rows))
	return err
}

// ownerRegion is a worker's region, for the regions helpers.
func ownerRegion(r ownerRow) string { return r.Region }

// ownersSummary is the line under the owners table: "3 workers: gw-1 owns 2, gw-2 owns 1".
func ownersSummary(rows []ownerRow) string {
	counts := map[string]int{}
	var owners []string
	stale := 0
	for _, r := range rows {
		if counts[r.Owner] == 0 {
			owners = append(owners, r.Owner)
		}
		counts[r.Owner]++
		if r.Stale {
			stale++
		}
	}
	slices.Sort(owners)
	line := plural(len(rows), "worker")
	for i, o := range owners {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		line += sep + o + " owns " + strconv.Itoa(counts[o])
	}
	if stale > 0 {
		line += ", " + strconv.Itoa(stale) + " stale"
	}
	return line + regionsSummary(rows, ownerRegion, nil)
}
