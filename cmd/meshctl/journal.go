package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) journalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "journal",
		Short: "Show and resolve the weight-update journal",
		Long: "The weight-update journal holds the record of a weight update (POST\n" +
			"/update_weights_from_disk) that is running or did not finish. While a record is open, its\n" +
			"workers stay disabled on every gateway and a new update is refused.",
		Example: "  meshctl journal show\n  meshctl journal resolve --acknowledge",
		Args:    groupArgs,
		RunE:    needSubcommand,
	}
	cmd.AddCommand(a.journalShowCommand(), a.journalResolveCommand())
	return cmd
}

// journalRecord is a record of GET /weight_update_journal.
type journalRecord struct {
	ID            string            `json:"id"`
	Targets       []string          `json:"targets"`
	Outcomes      map[string]string `json:"outcomes"`
	Coordinator   string            `json:"coordinator"`
	StartedAt     time.Time         `json:"started_at"`
	Status        string            `json:"status"`
	PriorDisabled []string          `json:"prior_disabled"`
}

func (a *app) journalShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Show the open weight-update record and each worker's outcome (GET /weight_update_journal)",
		Long: "Show the open weight-update record, if any: its id, coordinator, status (running;\n" +
			"failed: it ended with a worker not updated; interrupted: its coordinator restarted\n" +
			"mid-update; coordinator_lost: its coordinator died or left) and start, then one line per\n" +
			"worker with its outcome (pending, updated, failed, unknown). Prints nothing but a note\n" +
			"when no record is open.",
		Example: "  meshctl journal show\n  meshctl journal show -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ans, err := a.call(cmd.Context(), http.MethodGet, "/weight_update_journal", nil)
			if err != nil || a.output == outJSON {
				return err
			}
			var r struct {
				Records []journalRecord `json:"records"`
			}
			if err := decode("GET /weight_update_journal", ans.Body, &r); err != nil {
				return err
			}
			if len(r.Records) == 0 {
				_, err := fmt.Fprintln(a.stdout, "no weight update record is open")
				return err
			}
			for _, j := range r.Records {
				if _, err := fmt.Fprintf(a.stdout, "record %s  coordinator %s  status %s  started %s\n",
					j.ID, j.Coordinator, j.Status, j.StartedAt.UTC().Format(time.RFC3339)); err != nil {
					return err
				}
				t := newTable(a.stdout, "WORKER", "OUTCOME", "DISABLED_BEFORE")
				ids := append([]string(nil), j.Targets...)
				sort.Strings(ids)
				for _, id := range ids {
					before := ""
					for _, p := range j.PriorDisabled {
						if p == id {
							before = "yes"
						}
					}
					t.row(id, j.Outcomes[id], before)
				}
				if err := t.flush(); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func (a *app) journalResolveCommand() *cobra.Command {
	var ack bool
	var id string
	cmd := &cobra.Command{
		Use:   "resolve --acknowledge",
		Short: "Drop the open weight-update record (POST /weight_update_journal/resolve)",
		Long: "Drop the open weight-update record once you have checked its workers. Its workers stay\n" +
			"disabled: enable each one you verified with `meshctl workers enable ID`. Prints the ids\n" +
			"the record held. --acknowledge is required.",
		Example: "  meshctl journal resolve --acknowledge\n  meshctl journal resolve --acknowledge --id wu-1f2e3d4c5b6a7988",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !ack {
				return errors.New("journal resolve: --acknowledge is required: resolving drops the record, and its workers stay disabled until enabled one by one")
			}
			body := map[string]any{"acknowledge": true}
			if id != "" {
				body["id"] = id
			}
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			ans, err := a.call(cmd.Context(), http.MethodPost, "/weight_update_journal/resolve", b)
			if err != nil || a.output == outJSON {
				return err
			}
			var r struct {
				Resolved string   `json:"resolved"`
				Dropped  []string `json:"dropped"`
			}
			if err := decode("POST /weight_update_journal/resolve", ans.Body, &r); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "resolved %s; these workers stay disabled until enabled: %s\n",
				r.Resolved, strings.Join(r.Dropped, " "))
			return err
		},
	}
	cmd.Flags().BoolVar(&ack, "acknowledge", false, "confirm: drop the record; its workers stay disabled")
	cmd.Flags().StringVar(&id, "id", "", "the record to drop (default: the open one)")
	return cmd
}
