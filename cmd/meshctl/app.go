package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshgw/meshgw/version"
	"github.com/meshgw/meshgw/worker"
)

// defaultGateway is where meshctl looks without --gateway or $MESHCTL_GATEWAY.
const defaultGateway = "http://127.0.0.1:30000"

// Output formats of -o.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
)

// app holds the global flags and where the commands print.
type app struct {
	stdout io.Writer
	getenv func(string) string

	gateway  string
	adminKey string
	output   string
	timeout  time.Duration
	tls      tlsFlags
}

// rootCommand builds the command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "meshctl",
		Short: "Operate a meshgw gateway through its admin API",
		Long: "meshctl reads and changes a meshgw fleet through a gateway's admin API.\n\n" +
			"The gateway is --gateway, else $MESHCTL_GATEWAY, else " + defaultGateway + ". The admin key\n" +
			"is --admin-key, else $MESHCTL_ADMIN_KEY; it is sent as a bearer token and never printed.\n\n" +
			"For a gateway serving HTTPS (meshgw --tls-http), --tls-ca names its CA, and --tls-cert and\n" +
			"--tls-key a client certificate (meshctl cert create-client), which opens the admin API as\n" +
			"the admin key does.\n\n" +
			"Exit status: 0 on success, 1 when the gateway refused or could not be reached (or a\n" +
			"certificate file could not be written), 2 on a usage error. Errors are one line on stderr.",
		Example: "  meshctl peers\n" +
			"  meshctl workers list\n" +
			"  meshctl --gateway http://10.0.0.2:30000 workers list -o wide\n" +
			"  meshctl --gateway https://10.0.0.2:30000 --tls-ca certs/ca.crt --tls-cert certs/client-admin.crt --tls-key certs/client-admin.key peers\n" +
			"  MESHCTL_ADMIN_KEY=... meshctl raft -o json",
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// A command group (meshctl alone, workers, journal) needs no gateway: it only says that
		// a subcommand is missing.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.HasAvailableSubCommands() {
				return nil
			}
			return a.resolve()
		},
		RunE:    needSubcommand,
		Version: version.Line("meshctl"),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	f := root.PersistentFlags()
	f.StringVar(&a.gateway, "gateway", "", "the gateway's URL (default $MESHCTL_GATEWAY, else "+defaultGateway+")")
	f.StringVar(&a.adminKey, "admin-key", "", "the admin API key (default $MESHCTL_ADMIN_KEY); never printed")
	f.StringVarP(&a.output, "output", "o", outTable, "output format: table, wide or json (json prints the gateway's answer)")
	f.DurationVar(&a.timeout, "timeout", 15*time.Second, "how long to wait for the gateway's answer")
	a.tls.register(f)
	root.AddCommand(a.peersCommand(), a.ownersCommand(), a.workersCommand(), a.raftCommand(), a.statusCommand(), a.certCommand(),
		a.journalCommand(), a.probeCommand(), a.rebalanceCommand(), a.drainCommand(),
		completionCommand())
	return root
}

// resolve checks the global flags and fills them from the environment.
func (a *app) resolve() error {
	if a.gateway == "" {
		a.gateway = a.getenv("MESHCTL_GATEWAY")
	}
	if a.gateway == "" {
		a.gateway = defaultGateway
	}
	a.gateway = strings.TrimRight(a.gateway, "/")
	u, err := url.Parse(a.gateway)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--gateway %q: want an http:// or https:// URL", worker.RedactURL(a.gateway))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("--gateway %q: want no query or fragment", worker.RedactURL(a.gateway))
	}
	if u.Path != "" { // the root's "/" was trimmed above; an escaped path ("/%2F") is not empty
		return fmt.Errorf("--gateway %q: want no path (the admin API is at the gateway's root)", worker.RedactURL(a.gateway))
	}
	keyFrom := "--admin-key"
	if a.adminKey == "" {
		a.adminKey, keyFrom = a.getenv("MESHCTL_ADMIN_KEY"), "$MESHCTL_ADMIN_KEY"
	}
	if err := checkAdminKey(a.adminKey); err != nil {
		return fmt.Errorf("%s: %v", keyFrom, err)
	}
	switch a.output {
	case outTable, outWide, outJSON:
	default:
		return fmt.Errorf("-o %q: want table, wide or json", a.output)
	}
	if a.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", a.timeout)
	}
	return a.tls.resolve(a.getenv, u.Scheme == "https")
}

// client returns the admin API client of the resolved flags.
func (a *app) client() *client {
	return &client{
		base:    a.gateway,
		key:     a.adminKey,
		timeout: a.timeout,
		http:    &http.Client{Timeout: a.timeout, Transport: a.tls.transport()},
	}
}

// call sends one request and, with -o json, prints the answer as it came.
func (a *app) call(ctx context.Context, method, path string, body []byte) (answer, error) {
	ans, err := a.client().do(ctx, method, path, body)
	if err != nil {
		return ans, err
	}
	if a.output == outJSON {
		return ans, printJSON(a.stdout, ans.Body)
	}
	return ans, nil
}

// checkAdminKey refuses a key that cannot be a bearer token: one with a control character (a
// newline or carriage return read from a file, most often), which no HTTP header carries. Its
// error names the character, never the key.
func checkAdminKey(key string) error {
	for _, c := range []byte(key) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("the admin key contains a control character (%s), which an HTTP header cannot carry",
				strings.Trim(strconv.QuoteToASCII(string(rune(c))), `"`))
		}
	}
	return nil
}
