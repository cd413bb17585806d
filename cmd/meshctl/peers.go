package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// peersHeader are the columns of meshctl peers.
var peersHeader = []string{"NAME", "ADDRESS", "STATUS", "RAFT", "REGION", "COLOR", "VERSION", "OWNED", "APPLIED"}

// peersSortable are the columns --sort takes: those -o wide shows too.
var peersSortable = slices.Concat(peersHeader, []string{"LAG"})

func (a *app) peersCommand() *cobra.Command {
	var by string
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the mesh's gateways: status, raft role, owned workers (GET /mesh/peers)",
		Long: "List the gateways the mesh knows, as the answering gateway sees them, sorted by name\n" +
			"(then address; --sort COLUMN orders by another column). A * after a NAME marks the\n" +
			"answering gateway. A summary line follows the table: the count, the count by status and\n" +
			"the raft leader. In a fleet of several regions the rows are sorted by region first, and\n" +
			"the summary counts the gateways of each region.\n\n" +
			"STATUS is the membership state: alive, suspect, dead, left, or foreign (a gateway of\n" +
			"another cluster, refused). RAFT is the place in the raft configuration: leader, voter,\n" +
			"nonvoter, or - when not in it. OWNED and APPLIED are the owned-worker count and the raft\n" +
			"index each gateway last published.\n\n" +
			"-o wide adds LAG, how far APPLIED is behind the highest APPLIED listed (- for a foreign\n" +
			"gateway), and a column for each field the gateway answers beyond these.\n\n" +
			"When the answering gateway hears from no raft leader (a partition, a region cut off), a\n" +
			"last line says so: it serves from its last state and its writes answer 503 no_leader.",
		Example: "  meshctl peers\n  meshctl peers -o wide\n  meshctl peers --sort applied\n  meshctl peers -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSort(cmd, by, peersSortable); err != nil {
				return err
			}
			ans, err := a.call(cmd.Context(), http.MethodGet, "/mesh/peers", nil)
			if err != nil || a.output == outJSON {
				return err
			}
			var list struct {
				Peers []json.RawMessage `json:"peers"`
			}
			if err := decode("GET /mesh/peers", ans.Body, &list); err != nil {
				return err
			}
			peers := make([]peer, len(list.Peers))
			for i, raw := range list.Peers {
				if peers[i].extra, err = readRow("GET /mesh/peers", raw, &peers[i], peerColumns); err != nil {
					return err
				}
			}
			return printPeers(a.stdout, peers, a.output == outWide, by)
		},
	}
	sortFlag(cmd, &by, peersSortable, "by name, then address (by region first in a fleet of several regions)")
	return cmd
}

// peer is one gateway of GET /mesh/peers: the fields the table shows, and the others as the
// gateway answered them, flattened (FIELD.SUB) for -o wide.
type peer struct {
	ID           string `json:"id"`
	Address      string `json:"address"`
	Status       string `json:"status"`
	Raft         string `json:"raft"`
	Region       string `json:"region"`
	Color        string `json:"color"`
	Version      string `json:"version"`
	Owned        int    `json:"owned"`
	AppliedIndex uint64 `json:"applied_index"`
	Self         bool   `json:"self"`
	// CutOff and LeaderSilenceSecs: the answering gateway hears from no raft leader.
	CutOff            bool    `json:"cut_off"`
	LeaderSilenceSecs float64 `json:"leader_silence_secs"`

	extra map[string]string
}

// peerColumns are the fields peer shows in its own columns.
var peerColumns = map[string]bool{
	"id": true, "address": true, "status": true, "raft": true, "region": true, "color": true,
	"version": true, "owned": true, "applied_index": true, "self": true, "cut_off": true,
	"leader_silence_secs": true,
}

// readRow decodes one row of what's answer into v and returns the row's other fields (those
// not in known), flattened (FIELD.SUB), for the columns -o wide adds.
func readRow(what string, raw json.RawMessage, v any, known map[string]bool) (map[string]string, error) {
	if err := decode(what, raw, v); err != nil {
		return nil, err
	}
	var all map[string]any
	if err := decode(what, raw, &all); err != nil {
		return nil, err
	}
	extra := map[string]string{}
	for k, val := range all {
		if !known[k] {
			flatten(k, val, extra)
		}
	}
	return extra, nil
}

// extraColumns returns the names of the other fields of every row, sorted: one -o wide column
// each.
func extraColumns[R any](rows []R, extra func(R) map[string]string) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range extra(r) {
			seen[k] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// printPeers prints the peers table, sorted by name then address (or by the column by, shown or
// not), and its summary line; wide adds LAG and the fields the table does not know, one column
// each, in name order.
func printPeers(w io.Writer, peers []peer, wide bool, by string) error {
	header := slices.Clone(peersHeader)
	slices.SortStableFunc(peers, func(a, b peer) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Address, b.Address)
	})
	byRegionFirst(peers, peerRegion)
	var top uint64
	for _, p := range peers {
		if p.Status != "foreign" { // another cluster's raft indexes do not compare
			top = max(top, p.AppliedIndex)
		}
	}
	extra := extraColumns(peers, func(p peer) map[string]string { return p.extra })
	header = append(header, "LAG")
	for _, k := range extra {
		header = append(header, strings.ToUpper(k))
	}
	rows := make([][]string, 0, len(peers))
	for _, p := range peers {
		name := p.ID
		if p.Self {
			name += "*"
		}
		lag := ""
		if p.Status != "foreign" {
			lag = strconv.FormatUint(top-p.AppliedIndex, 10)
		}
		cells := []string{name, p.Address, p.Status, p.Raft, p.Region, p.Color, p.Version,
			strconv.Itoa(p.Owned), strconv.FormatUint(p.AppliedIndex, 10), lag}
		for _, k := range extra {
			cells = append(cells, p.extra[k])
		}
		rows = append(rows, cells)
	}
	sortRows(header, rows, by) // by any column, shown or not
	if !wide {
		header = header[:len(peersHeader)]
	}
	t := newTable(w, header...)
	for _, r := range rows {
		t.row(r[:len(header)]...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, peersSummary(peers)); err != nil {
		return err
	}
	for _, p := range peers {
		if !p.Self || !p.CutOff {
			continue
		}
		if alive, voters := aliveVoters(peers); voters > 0 && alive > voters/2 {
			_, err := fmt.Fprintf(w, "%s (this gateway) has heard from no raft leader for %gs, with %d of %d voters alive: an election, most likely; writes answer 503 no_leader until a leader is elected\n",
				p.ID, p.LeaderSilenceSecs, alive, voters)
			return err
		}
		_, err := fmt.Fprintf(w, "%s (this gateway) is cut off: no raft leader heard for %gs; it serves its workers from its last state and answers writes 503 no_leader until it reaches a quorum again\n",
			p.ID, p.LeaderSilenceSecs)
		return err
	}
	return nil
}

// aliveVoters counts the raft voters of the list, and of them the ones the mesh lists alive: a
// gateway that hears no leader while a quorum of voters is alive is most likely seeing an
// election, not a cut.
func aliveVoters(peers []peer) (alive, voters int) {
	for _, p := range peers {
		if p.Raft != "voter" {
			continue
		}
		voters++
		if p.Status == "alive" {
			alive++
		}
	}
	return alive, voters
}

// peerRegion is a peer's region, for the regions helpers.
func peerRegion(p peer) string { return p.Region }

// peersSummary is the line under the peers table: "3 peers: 3 alive, leader gw-1", and in a
// fleet of several regions the count of each ("; by region: eu 2 (leader), us 1").
func peersSummary(peers []peer) string {
	counts := map[string]int{}
	leader, leaderRegion := "no leader", ""
	for _, p := range peers {
		counts[p.Status]++
		if p.Raft == "leader" {
			leader, leaderRegion = "leader "+p.ID, p.Region
		}
	}
	line := plural(len(peers), "peer") + ": "
	if c := countsLine([]string{"alive", "suspect", "dead", "left", "foreign"}, counts); c != "" {
		line += c + ", "
	}
	return line + leader + regionsSummary(peers, peerRegion, func(region string) string {
		if leader != "no leader" && region == leaderRegion {
			return "leader"
		}
		return ""
	})
}
