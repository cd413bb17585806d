package main

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"
)

func (a *app) raftCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "raft",
		Short: "Show the raft group: leader, term, applied index, servers (GET /mesh/raft)",
		Long: "Show the raft group as the gateway sees it: the term, this gateway's applied index, and\n" +
			"each server of the configuration with its suffrage; LEADER marks the leader. The last line\n" +
			"counts the voters against those the leader works towards (--raft-voters, at most the\n" +
			"servers; \"(auto)\" when the leader chooses them by the fleet's size) and says whether\n" +
			"the group survives the loss of one voter: \"voters 1 of 3 (auto): not fault-tolerant\"\n" +
			"while joined gateways are not voters yet.",
		Example: "  meshctl raft\n  meshctl raft -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ans, err := a.call(cmd.Context(), http.MethodGet, "/mesh/raft", nil)
			if err != nil || a.output == outJSON {
				return err
			}
			var r struct {
				Leader       string `json:"leader"`
				Term         uint64 `json:"term"`
				AppliedIndex uint64 `json:"applied_index"`
				Servers      []struct {
					ID       string `json:"id"`
					Address  string `json:"address"`
					Suffrage string `json:"suffrage"`
				} `json:"servers"`
				VotersWanted int  `json:"voters_wanted"`
				VotersAuto   bool `json:"voters_auto"`
			}
			if err := decode("GET /mesh/raft", ans.Body, &r); err != nil {
				return err
			}
			t := newTable(a.stdout, "ID", "ADDRESS", "SUFFRAGE", "LEADER", "TERM", "APPLIED")
			term, applied := strconv.FormatUint(r.Term, 10), strconv.FormatUint(r.AppliedIndex, 10)
			voters := 0
			for _, s := range r.Servers {
				leader := ""
				if s.ID == r.Leader && r.Leader != "" {
					leader = "*"
				}
				if s.Suffrage == "voter" {
					voters++
				}
				t.row(s.ID, s.Address, s.Suffrage, leader, term, applied)
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.stdout, votersLine(voters, r.VotersWanted, r.VotersAuto))
			return err
		},
	}
}

// votersLine says how many of the servers vote, of the voters wanted (0: a gateway too old to
// say; auto: the count the leader chooses by the fleet's size), and whether the group keeps its
// quorum when one voter is lost (three voters or more).
func votersLine(voters, wanted int, auto bool) string {
	line := "voters " + strconv.Itoa(voters)
	if wanted > 0 {
		line += " of " + strconv.Itoa(wanted)
		if auto {
			line += " (auto)"
		}
	}
	if voters >= 3 {
		return line + ": fault-tolerant"
	}
	return line + ": not fault-tolerant (losing one voter stops raft writes)"
}

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the gateway's pool, admission, raft and mesh summary (GET /status)",
		Long: "Show GET /status: the pool summary, admission counters, the raft summary and the mesh's\n" +
			"gateways counted by status, one field a line (nested fields joined with dots).",
		Example: "  meshctl status\n  meshctl status -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ans, err := a.call(cmd.Context(), http.MethodGet, "/status", nil)
			if err != nil || a.output == outJSON {
				return err
			}
			return printFields(a.stdout, ans.Body)
		},
	}
}
