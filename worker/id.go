package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ID is a worker's deterministic identifier: "w-" followed by the first 12 hex digits of the
// SHA-256 of the canonical URL, with "@RANK" appended for data-parallel ranks. Two gateways that
// register the same URL therefore agree on the id, and a restart never orphans a record.
type ID string

// NewID returns the id of the worker at canonicalURL. rank < 0 means the worker has no
// data-parallel rank.
func NewID(canonicalURL string, rank int) ID {
	sum := sha256.Sum256([]byte(canonicalURL))
	id := "w-" + hex.EncodeToString(sum[:6])
	if rank >= 0 {
		id += "@" + strconv.Itoa(rank)
	}
	return ID(id)
}

// defaultPorts are made explicit by CanonicalURL so that "http://h" and "http://h:80" agree.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// CanonicalURL returns raw in canonical form: scheme and host lower-cased, the default port made
// explicit, no trailing slash. Engine URLs (allowPath false) may carry no path, query or fragment;
// external providers (allowPath true) may carry a path such as "/v1", kept without its trailing
// slash. ipc:// URLs name a socket file and keep their path as given.
func CanonicalURL(raw string, allowPath bool) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("url is empty")
	}
	if !strings.Contains(raw, "://") {
		return "", fmt.Errorf("url %q has no scheme; want http://, https://, grpc://, tcp:// or ipc://", RedactURL(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url %q does not parse: %v", RedactURL(raw), urlErrReason(err))
	}
	raw = RedactURL(raw)
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "http", "https", "grpc", "tcp":
	case "ipc":
		p := u.Host + u.Path
		if p == "" {
			return "", fmt.Errorf("url %q names no socket path", raw)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("url %q has a query or fragment; ipc URLs name only a socket path", raw)
		}
		return "ipc://" + p, nil
	case "":
		return "", fmt.Errorf("url %q has no scheme; want http://, https://, grpc://, tcp:// or ipc://", raw)
	default:
		return "", fmt.Errorf("url %q has scheme %q; want http, https, grpc, tcp or ipc", raw, u.Scheme)
	}
	if u.User != nil {
		return "", fmt.Errorf("url %q carries user info; pass credentials as api_key", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", fmt.Errorf("url %q has a query or fragment; a worker URL is a base URL", raw)
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	if path != "" && !allowPath {
		return "", fmt.Errorf("url %q has a path %q; a worker URL is scheme://host:port only", raw, u.Path)
	}
	if !utf8.ValidString(u.Hostname()) {
		return "", fmt.Errorf("url %q: host is not valid UTF-8", truncate(raw, 80))
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("url %q has no host", raw)
	}
	if err := checkHost(host); err != nil {
		return "", fmt.Errorf("url %q: %v", truncate(raw, 80), err)
	}
	port := u.Port()
	if port == "" {
		port = defaultPorts[scheme]
	}
	if port == "" {
		return "", fmt.Errorf("url %q has no port; %s:// URLs need one", raw, scheme)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("url %q has port %q; want 1-65535", raw, port)
	}
	return scheme + "://" + net.JoinHostPort(host, port) + path, nil
}

// MaxHostLen is the longest DNS name (RFC 1035, section 2.3.4, in its text form).
const MaxHostLen = 253

// checkHost refuses a host that is neither an IP address nor a DNS name: at most MaxHostLen
// characters in dot-separated labels of 1 to 63 letters, digits, '-' or '_' (internationalised
// names in their punycode form), with an optional trailing dot. host is lower-cased.
func checkHost(host string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if len(host) > MaxHostLen {
		return fmt.Errorf("host is %d characters, longer than %d (a DNS name's limit)", len(host), MaxHostLen)
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host %q has a label of %d characters; want 1 to 63", host, len(label))
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("host %q is not a DNS name or IP address (%q; IDN names go in punycode)", host, c)
			}
		}
	}
	return nil
}

// truncate shortens s to n bytes, marking the cut, so that an error quotes at most a line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func urlErrReason(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// RedactURL returns raw without the parts of a URL that may carry a credential: user info
// ("user:password@") becomes "***@", a query or fragment becomes "?***" or "#***". It takes any
// string, a URL or not, so that an error message may quote what it refused.
func RedactURL(raw string) string {
	scheme, rest, hasScheme := strings.Cut(raw, "://")
	if !hasScheme {
		rest = raw
	}
	tail := ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		tail, rest = rest[i:i+1]+"***", rest[:i]
	}
	end := strings.IndexByte(rest, '/')
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		rest = "***@" + rest[at+1:]
	}
	if hasScheme {
		return scheme + "://" + rest + tail
	}
	return rest + tail
}

// DisplayID is the short host:port form of a canonical URL that operators read in tables.
func DisplayID(canonicalURL string) string {
	if s, ok := strings.CutPrefix(canonicalURL, "ipc://"); ok {
		return s
	}
	u, err := url.Parse(canonicalURL)
	if err != nil {
		return canonicalURL
	}
	return u.Host
}
