package main

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) peersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "peers",
		Short: "List the mesh's gateways: status, raft role, owned workers (GET /mesh/peers)",
		Long: "List the gateways the mesh knows, as the answering gateway sees them, sorted by name.\n" +
			"A * after a NAME marks the answering gateway.\n\n" +
			"STATUS is the membership state: alive, suspect, dead, left, or foreign (a gateway of\n" +
			"another cluster, refused). RAFT is the place in the raft configuration: leader, voter,\n" +
			"nonvoter, or - when not in it. OWNED and APPLIED are the owned-worker count and the raft\n" +
			"index each gateway last published.\n\n" +
			"-o wide adds LAG, how far APPLIED is behind the highest APPLIED listed (- for a foreign\n" +
			"gateway), and a column for each field the gateway answers beyond these.",
		Example: "  meshctl peers\n  meshctl peers -o wide\n  meshctl peers -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
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
				if err := peers[i].read(raw); err != nil {
					return err
				}
			}
			return printPeers(a.stdout, peers, a.output == outWide)
		},
	}
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

	extra map[string]string
}

// peerColumns are the fields peer shows in its own columns.
var peerColumns = map[string]bool{
	"id": true, "address": true, "status": true, "raft": true, "region": true, "color": true,
	"version": true, "owned": true, "applied_index": true, "self": true,
}

// read decodes one peer of the answer.
func (p *peer) read(raw json.RawMessage) error {
	if err := decode("GET /mesh/peers", raw, p); err != nil {
		return err
	}
	var all map[string]any
	if err := decode("GET /mesh/peers", raw, &all); err != nil {
		return err
	}
	p.extra = map[string]string{}
	for k, v := range all {
		if !peerColumns[k] {
			flatten(k, v, p.extra)
		}
	}
	return nil
}

// printPeers prints the peers table; wide adds LAG and the fields the table does not know,
// one column each, in name order.
func printPeers(w io.Writer, peers []peer, wide bool) error {
	header := []string{"NAME", "ADDRESS", "STATUS", "RAFT", "REGION", "COLOR", "VERSION", "OWNED", "APPLIED"}
	var (
		extra []string
		top   uint64
	)
	if wide {
		seen := map[string]bool{}
		for _, p := range peers {
			if p.Status != "foreign" { // another cluster's raft indexes do not compare
				top = max(top, p.AppliedIndex)
			}
			for k := range p.extra {
				if !seen[k] {
					seen[k] = true
					extra = append(extra, k)
				}
			}
		}
		sort.Strings(extra)
		header = append(header, "LAG")
		for _, k := range extra {
			header = append(header, strings.ToUpper(k))
		}
	}
	t := newTable(w, header...)
	for _, p := range peers {
		name := p.ID
		if p.Self {
			name += "*"
		}
		cells := []string{name, p.Address, p.Status, p.Raft, p.Region, p.Color, p.Version,
			strconv.Itoa(p.Owned), strconv.FormatUint(p.AppliedIndex, 10)}
		if wide {
			lag := ""
			if p.Status != "foreign" {
				lag = strconv.FormatUint(top-p.AppliedIndex, 10)
			}
			cells = append(cells, lag)
			for _, k := range extra {
				cells = append(cells, p.extra[k])
			}
		}
		t.row(cells...)
	}
	return t.flush()
}
