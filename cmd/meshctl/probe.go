package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// probeCommand asks a gateway's probe endpoints, for a container's HEALTHCHECK or a script: the
// distroless image has no curl or wget, and meshctl is in it.
func (a *app) probeCommand() *cobra.Command {
	paths := map[string]string{"liveness": "/liveness", "readiness": "/readiness"}
	return &cobra.Command{
		Use:   "probe liveness|readiness",
		Short: "Ask the gateway's /liveness or /readiness; exit 0 when it answers 200",
		Long: "Ask GET /liveness (200 while the process runs) or GET /readiness (200 while it has\n" +
			"routable workers, is not draining and, with --readiness-requires-quorum, raft has a\n" +
			"leader) and print the answer. Exit 0 on 200, 1 otherwise (with the status and reason):\n" +
			"the Docker image's HEALTHCHECK runs `meshctl probe liveness`. --gateway may name the\n" +
			"--health-check-port listener, which serves only these endpoints.",
		Example:   "  meshctl probe liveness\n  meshctl --gateway http://127.0.0.1:8080 probe readiness",
		Args:      usageArgs(cobra.ExactArgs(1)),
		ValidArgs: []string{"liveness", "readiness"},
		RunE: func(cmd *cobra.Command, args []string) error {
			path, ok := paths[args[0]]
			if !ok {
				return fmt.Errorf("probe %q: want liveness or readiness (usage: %s)", args[0], cmd.UseLine())
			}
			ans, err := a.call(cmd.Context(), http.MethodGet, path, nil)
			if err != nil || a.output == outJSON {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s %d %s\n", args[0], ans.Status, http.StatusText(ans.Status))
			return err
		},
	}
}
