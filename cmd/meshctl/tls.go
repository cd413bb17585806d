package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/pflag"
)

// tlsFlags are meshctl's side of a gateway serving HTTPS (meshgw --tls-http): the CA its
// certificate chains to, and a client certificate (meshctl cert create-client), which opens
// the admin API as the admin key does.
type tlsFlags struct {
	ca, cert, key string
	cfg           *tls.Config // built by resolve; nil: the system's roots, no client certificate
}

func (f *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "", "PEM CA certificate that an https:// gateway's certificate chains to (default $MESHCTL_TLS_CA, else the system's)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM client certificate to present to an https:// gateway (default $MESHCTL_TLS_CERT)")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert (default $MESHCTL_TLS_KEY)")
}

// resolve fills the flags from the environment and loads the files.
func (f *tlsFlags) resolve(getenv func(string) string, https bool) error {
	for _, v := range []struct {
		p   *string
		env string
	}{{&f.ca, "MESHCTL_TLS_CA"}, {&f.cert, "MESHCTL_TLS_CERT"}, {&f.key, "MESHCTL_TLS_KEY"}} {
		if *v.p == "" {
			*v.p = getenv(v.env)
		}
	}
	if f.ca == "" && f.cert == "" && f.key == "" {
		return nil
	}
	if !https {
		return errors.New("--tls-ca, --tls-cert and --tls-key need an https:// --gateway")
	}
	if (f.cert == "") != (f.key == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		data, err := os.ReadFile(f.ca)
		if err != nil {
			return fmt.Errorf("--tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return fmt.Errorf("--tls-ca %s holds no PEM certificate", f.ca)
		}
	}
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return fmt.Errorf("--tls-cert %s and --tls-key %s are not a matching PEM certificate and key", f.cert, f.key)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	f.cfg = cfg
	return nil
}

// transport is the HTTP transport of the resolved flags; nil means net/http's default.
func (f *tlsFlags) transport() http.RoundTripper {
	if f.cfg == nil {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = f.cfg
	return t
}
