package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// addOptions are the flags of `workers add`.
type addOptions struct {
	spec, apiKeyEnv, connMode, provider, region, owner string
	models, capabilities, labels                       []string
	priority, dpRank                                   int
	cost                                               float64
}

func (a *app) addCommand() *cobra.Command {
	var o addOptions
	cmd := &cobra.Command{
		Use:   "add URL [flags] | add --spec FILE",
		Short: "Register a worker (POST /workers)",
		Long: "Register a worker from flags, or from a JSON worker spec with --spec FILE (- reads stdin;\n" +
			"no other spec flag then). The gateway validates the spec before writing anything.\n" +
			"An identical spec already registered is no change; another spec under the same id is\n" +
			"refused (409 worker_exists). The API key is read from the environment variable named by\n" +
			"--api-key-env, so that it never sits on a command line; it is never printed.",
		Example: "  meshctl workers add http://127.0.0.1:8013 --model llama-3 --priority 80\n" +
			"  OPENAI_KEY=sk-... meshctl workers add https://api.openai.com/v1 \\\n" +
			"      --connection-mode external --provider openai --api-key-env OPENAI_KEY\n" +
			"  meshctl workers add --spec worker.json",
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := a.addBody(cmd, &o, args)
			if err != nil {
				return err
			}
			return a.recordCall(cmd.Context(), http.MethodPost, "/workers", body)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.spec, "spec", "", "a JSON worker spec file (- for stdin) instead of URL and flags")
	f.StringSliceVar(&o.models, "model", nil, "a model the worker serves (repeatable or comma-separated; none means any)")
	f.StringSliceVar(&o.capabilities, "capability", nil, "a capability: chat, completions, embeddings, streaming, ... (default all)")
	f.StringArrayVar(&o.labels, "label", nil, "a label KEY=VALUE (repeatable)")
	f.IntVar(&o.priority, "priority", 50, "routing priority, 0-1000")
	f.Float64Var(&o.cost, "cost", 1, "routing cost")
	f.StringVar(&o.connMode, "connection-mode", "", "http, grpc, zmq or external (default: from the URL's scheme: grpc:// grpc, ipc:// and tcp:// zmq, else http)")
	f.StringVar(&o.provider, "provider", "", "for external workers: openai, openai_compatible, anthropic, azure_openai, gemini (default openai_compatible)")
	f.StringVar(&o.region, "region", "", "the worker's region (default the gateway's --region)")
	f.StringVar(&o.apiKeyEnv, "api-key-env", "", "the environment variable holding the worker's API key")
	f.IntVar(&o.dpRank, "dp-rank", 0, "the data-parallel rank")
	f.StringVar(&o.owner, "owner", "", "the owning gateway's node id (default the answering gateway)")
	return cmd
}

// specFlags are the flags that make a spec; --spec takes none of them.
var specFlags = []string{"model", "capability", "label", "priority", "cost", "connection-mode",
	"provider", "region", "api-key-env", "dp-rank", "owner"}

// addBody builds the POST /workers body from --spec or from the URL and flags.
func (a *app) addBody(cmd *cobra.Command, o *addOptions, args []string) ([]byte, error) {
	if o.spec != "" {
		if len(args) > 0 {
			return nil, fmt.Errorf("workers add: give a URL or --spec, not both")
		}
		for _, name := range specFlags {
			if cmd.Flags().Changed(name) {
				return nil, fmt.Errorf("workers add: --%s cannot be combined with --spec (put it in the file)", name)
			}
		}
		return readSpec(o.spec, cmd.InOrStdin())
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("workers add: give the worker's URL or --spec FILE (usage: %s)", cmd.UseLine())
	}
	body := map[string]any{"url": args[0]}
	changed := cmd.Flags().Changed
	set := func(flag, field string, v any) {
		if changed(flag) {
			body[field] = v
		}
	}
	set("model", "models", o.models)
	set("capability", "capabilities", o.capabilities)
	set("priority", "priority", o.priority)
	set("cost", "cost", o.cost)
	set("connection-mode", "connection_mode", o.connMode)
	set("provider", "provider", o.provider)
	set("region", "region", o.region)
	set("dp-rank", "dp_rank", o.dpRank)
	set("owner", "owner", o.owner)
	if changed("label") {
		labels, err := parseLabels(o.labels)
		if err != nil {
			return nil, err
		}
		body["labels"] = labels
	}
	if o.apiKeyEnv != "" {
		key := a.getenv(o.apiKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("--api-key-env: $%s is not set or empty", o.apiKeyEnv)
		}
		body["api_key"] = key
	}
	return json.Marshal(body)
}

// parseLabels reads KEY=VALUE labels.
func parseLabels(list []string) (map[string]string, error) {
	labels := make(map[string]string, len(list))
	for _, l := range list {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", l)
		}
		labels[k] = v
	}
	return labels, nil
}

// readSpec reads a JSON worker spec and checks that it is one JSON object; the gateway checks
// its fields.
func readSpec(path string, stdin io.Reader) ([]byte, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, 1<<20+1))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--spec: %v", err)
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("--spec %s: not one JSON object", path)
	}
	if dec.More() {
		return nil, fmt.Errorf("--spec %s: more than one JSON value", path)
	}
	return bytes.TrimSpace(data), nil
}
