package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sharedos/sharedos-mcp/kernel/secret"
)

// What the audit records of a call's arguments ([audit] arguments).
const (
	// ArgumentsDigest records the SHA-256 of the arguments' canonical JSON
	// (hashing.CanonicalJSON): which arguments a call had can be checked
	// against a copy, and nothing of their values is in the record.
	ArgumentsDigest = "digest"
	// ArgumentsFull records the arguments themselves, bounded, and their
	// digest.
	ArgumentsFull = "full"
	// ArgumentsNone records neither.
	ArgumentsNone = "none"
)

// Protocols of an OTLP exporter ([telemetry] otlp_protocol, or
// OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultServiceName is the service.name the kernel's telemetry carries
// when neither service_name nor OTEL_SERVICE_NAME says otherwise.
const DefaultServiceName = "sharedos-kernel"

// Telemetry is the [telemetry] table: where the kernel exports its traces
// and metrics, and its audit events as log records (docs/telemetry.md).
// Empty strings are left for the standard OTEL_* variables to fill; with
// neither, nothing is exported.
type Telemetry struct {
	// Endpoint is otlp_endpoint: the OTLP base URL of every signal
	// (http://host:4318 for http/protobuf, http://host:4317 for grpc).
	Endpoint string
	// Protocol is otlp_protocol: ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// Headers go with every export. Values may name secrets
	// ({secret:NAME}, each of which names one of Config.Secrets); they are
	// expanded only when the exporters are made, and never shown.
	Headers map[string]string
	// ServiceName is service_name.
	ServiceName string
	// AuditLogs is audit_logs: every audit event is also exported as a
	// log record, from a cursor kept in the state directory.
	AuditLogs bool
}

type fileTelemetry struct {
	OTLPEndpoint string            `toml:"otlp_endpoint"`
	OTLPProtocol string            `toml:"otlp_protocol"`
	Headers      map[string]string `toml:"headers"`
	ServiceName  *string           `toml:"service_name"`
	AuditLogs    bool              `toml:"audit_logs"`
}

func parseArguments(s string) (string, error) {
	switch s {
	case "":
		return ArgumentsDigest, nil
	case ArgumentsDigest, ArgumentsFull, ArgumentsNone:
		return s, nil
	}
	return "", fmt.Errorf("[audit] arguments = %q: want %q (the default: a SHA-256 of each call's arguments), %q (the arguments, bounded) or %q", s, ArgumentsDigest, ArgumentsFull, ArgumentsNone)
}

func parseTelemetry(ft *fileTelemetry) (*Telemetry, error) {
	if ft == nil {
		return nil, nil
	}
	t := &Telemetry{Endpoint: ft.OTLPEndpoint, Protocol: ft.OTLPProtocol, AuditLogs: ft.AuditLogs}
	if t.Endpoint != "" {
		if err := CheckEndpoint(t.Endpoint); err != nil {
			return nil, fmt.Errorf("[telemetry] otlp_endpoint: %w", err)
		}
	}
	if t.Protocol != "" && !slices.Contains([]string{ProtocolHTTP, ProtocolGRPC}, t.Protocol) {
		return nil, fmt.Errorf("[telemetry] otlp_protocol = %q: want %q or %q", t.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if ft.ServiceName != nil {
		if strings.TrimSpace(*ft.ServiceName) == "" {
			return nil, fmt.Errorf("[telemetry] service_name is empty; remove it for %q", DefaultServiceName)
		}
		t.ServiceName = *ft.ServiceName
	}
	for name := range ft.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("[telemetry] headers: %q is not an HTTP header name", name)
		}
	}
	// A header's value is never quoted back: it may hold a credential.
	for name, v := range ft.Headers {
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("[telemetry] headers: the value of %q holds a line break or NUL", name)
		}
	}
	if len(ft.Headers) > 0 {
		t.Headers = ft.Headers
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		if _, err := secret.Refs(t.Headers[name]); err != nil {
			return nil, fmt.Errorf("[telemetry] headers: %s: %w", name, err)
		}
	}
	return t, nil
}

// SecretNames returns the secrets t's header values refer to, each
// once, in order of name; none for a nil t.
func (t *Telemetry) SecretNames() []string {
	var names []string
	for _, ref := range t.secretRefs() {
		names = append(names, ref.secret)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// headerRef is a {secret:NAME} in the value of one of [telemetry]'s
// headers.
type headerRef struct{ header, secret string }

// secretRefs returns the secrets t's header values refer to, by header
// name and then in the order the value names them. parseTelemetry has
// checked every reference is well formed.
func (t *Telemetry) secretRefs() []headerRef {
	if t == nil {
		return nil
	}
	var refs []headerRef
	for _, h := range slices.Sorted(maps.Keys(t.Headers)) {
		names, _ := secret.Refs(t.Headers[h])
		for _, n := range names {
			refs = append(refs, headerRef{h, n})
		}
	}
	return refs
}

// CheckEndpoint checks an OTLP endpoint: an absolute http or https URL
// with a host, and no user information (a credential belongs in headers,
// where it is never shown). The errors quote no URL that may hold one.
func CheckEndpoint(s string) error {
	const want = "want an http:// or https:// URL, e.g. http://127.0.0.1:4318"
	shown := strconv.Quote(s)
	if strings.Contains(s, "@") {
		shown = "the URL"
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s: %s", shown, want)
	case u.User != nil:
		return fmt.Errorf("the URL holds a user or password; put credentials in headers")
	case u.Host == "":
		return fmt.Errorf("%s names no host", shown)
	}
	return nil
}

// validHeaderName is RFC 9110's token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
