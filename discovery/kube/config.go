package kube

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Connect finds the API server as client-go's loading rules do and returns a client for it and
// where its configuration came from: in a pod (KUBERNETES_SERVICE_HOST set) the in-cluster
// configuration (the service account's token and CA), elsewhere $KUBECONFIG or ~/.kube/config
// with its current context, so that an operator can run meshgw from a laptop against a cluster.
func Connect(userAgent string) (kubernetes.Interface, string, error) {
	cfg, from, err := restConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.UserAgent = userAgent
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client from %s: %v", from, err)
	}
	return c, from, nil
}

func restConfig() (*rest.Config, string, error) {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster kubernetes configuration: %v", err)
		}
		return cfg, "in-cluster service account", nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if errors.Is(err, clientcmd.ErrEmptyConfig) || clientcmd.IsEmptyConfig(err) {
			return nil, "", errors.New("no kubernetes configuration: not in a pod, and neither $KUBECONFIG nor ~/.kube/config names a cluster")
		}
		return nil, "", fmt.Errorf("kubernetes configuration: %v", oneLine(err.Error()))
	}
	from := "~/.kube/config"
	if files := rules.Precedence; len(files) > 0 && os.Getenv("KUBECONFIG") != "" {
		from = "$KUBECONFIG"
	}
	return cfg, from, nil
}
