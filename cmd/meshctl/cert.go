package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshgw/meshgw/certs"
)

// defaultCertDir is where `meshctl cert` writes without --dir.
const defaultCertDir = "certs"

// fileError is a certificate command that could not write its files (one exists, a folder is
// not writable): exit 1, as a refusal.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }
func (*fileError) fromGateway()    {}

// certFlags are the flags every `meshctl cert create-*` takes.
type certFlags struct {
	dir       string
	days      int
	overwrite bool
}

func (f *certFlags) register(cmd *cobra.Command, defDays int) {
	cmd.Flags().StringVar(&f.dir, "dir", defaultCertDir, "folder of the CA and the certificates (made 0700 when missing)")
	cmd.Flags().IntVar(&f.days, "days", defDays, "days the certificate is valid")
	cmd.Flags().BoolVar(&f.overwrite, "overwrite", false, "replace files that exist (default: refuse)")
}

func (f *certFlags) options() (certs.Options, error) {
	if f.days < 1 {
		return certs.Options{}, fmt.Errorf("--days %d: want at least 1", f.days)
	}
	return certs.Options{Dir: f.dir, Lifetime: time.Duration(f.days) * 24 * time.Hour, Overwrite: f.overwrite}, nil
}

// certCommand is `meshctl cert`: it makes files and never talks to a gateway.
func (a *app) certCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make the CA and the certificates of mutual TLS (--tls-cert, --tls-key, --tls-ca)",
		Long: "Make the files of meshgw's mutual TLS, as `consul tls` and `cockroach cert` do: one CA per\n" +
			"cluster, one node certificate per gateway (raft, gRPC and --tls-http), and client\n" +
			"certificates for meshctl. Keys are ECDSA P-256, written 0600; certificates 0644. An\n" +
			"existing file is never replaced without --overwrite. Keep ca.key off the gateways.",
		Example: "  meshctl cert create-ca --dir certs\n" +
			"  meshctl cert create-node gw1 --host 10.0.0.1 --host gw1.internal --dir certs\n" +
			"  meshctl cert create-client admin --dir certs",
		// No gateway: the global flags are not resolved.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		Args:              groupArgs,
		RunE:              needSubcommand,
	}
	cmd.AddCommand(a.createCACommand(), a.createNodeCommand(), a.createClientCommand())
	return cmd
}

func (a *app) createCACommand() *cobra.Command {
	var f certFlags
	cmd := &cobra.Command{
		Use:     "create-ca",
		Short:   "Make the cluster's CA: ca.crt and ca.key (10 years)",
		Example: "  meshctl cert create-ca --dir certs",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			return a.wrote(certs.CreateCA(o))
		},
	}
	f.register(cmd, int(certs.DefaultCALifetime/(24*time.Hour)))
	return cmd
}

func (a *app) createNodeCommand() *cobra.Command {
	var f certFlags
	var hosts []string
	cmd := &cobra.Command{
		Use:   "create-node NODE-ID --host HOST...",
		Short: "Make a gateway's certificate: node-NODE-ID.crt and .key, signed by the CA (2 years)",
		Long: "Make the certificate of the gateway whose --node-id is NODE-ID, signed by ca.crt and ca.key\n" +
			"in --dir. Its common name is NODE-ID (what --tls-verify-node-id checks); --host lists the IP\n" +
			"addresses and DNS names it is reached at (repeatable or comma-separated). It serves both\n" +
			"as a server and as a client certificate, as raft and gRPC need.",
		Example: "  meshctl cert create-node gw1 --host 10.0.0.1 --dir certs\n" +
			"  meshctl cert create-node gw2 --host 10.0.0.2,gw2.internal --dir certs --overwrite   # rotate",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			if len(hosts) == 0 {
				return fmt.Errorf("cert create-node: --host is required (an IP address or DNS name peers reach %s at)", args[0])
			}
			return a.wrote(certs.CreateNode(o, args[0], hosts))
		},
	}
	f.register(cmd, int(certs.DefaultNodeLifetime/(24*time.Hour)))
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "IP address or DNS name of the gateway (repeatable, comma-separated)")
	return cmd
}

func (a *app) createClientCommand() *cobra.Command {
	var f certFlags
	cmd := &cobra.Command{
		Use:   "create-client [NAME]",
		Short: "Make a client certificate for meshctl: client-NAME.crt and .key (NAME: admin; 2 years)",
		Long: "Make a client certificate signed by the CA in --dir. meshctl presents it with --tls-cert\n" +
			"and --tls-key to a gateway serving HTTPS (--tls-http), where it opens the admin API as the\n" +
			"admin key does. It is good for client use only: raft and gRPC refuse it.",
		Example: "  meshctl cert create-client --dir certs\n  meshctl cert create-client ops-alice --dir certs",
		Args:    usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			name := "admin"
			if len(args) == 1 {
				name = args[0]
			}
			return a.wrote(certs.CreateClient(o, name))
		},
	}
	f.register(cmd, int(certs.DefaultClientLifetime/(24*time.Hour)))
	return cmd
}

// wrote prints the files a create-* wrote, with their modes, or returns its error.
func (a *app) wrote(paths []string, err error) error {
	if err != nil {
		return &fileError{err: err}
	}
	for _, p := range paths {
		mode := "?"
		if fi, err := os.Stat(p); err == nil {
			mode = fmt.Sprintf("%04o", fi.Mode().Perm())
		}
		fmt.Fprintf(a.stdout, "wrote %s (%s)\n", p, mode)
	}
	return nil
}
