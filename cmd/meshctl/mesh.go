package main

import (
	"net/http"
	"strconv"

	"github.com/spf13/cobra"
)

func (a *app) raftCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "raft",
		Short: "Show the raft group: leader, term, applied index, servers (GET /mesh/raft)",
		Long: "Show the raft group as the gateway sees it: the term, this gateway's applied index, and\n" +
			"each server of the configuration with its suffrage; LEADER marks the leader.",
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
			}
			if err := decode("GET /mesh/raft", ans.Body, &r); err != nil {
				return err
			}
			t := newTable(a.stdout, "ID", "ADDRESS", "SUFFRAGE", "LEADER", "TERM", "APPLIED")
			term, applied := strconv.FormatUint(r.Term, 10), strconv.FormatUint(r.AppliedIndex, 10)
			for _, s := range r.Servers {
				leader := ""
				if s.ID == r.Leader && r.Leader != "" {
					leader = "*"
				}
				t.row(s.ID, s.Address, s.Suffrage, leader, term, applied)
			}
			return t.flush()
		},
	}
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
