package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// MaxPathValue is the longest path or URL a typed placeholder takes, in
// bytes (Linux's PATH_MAX).
const MaxPathValue = 4096

// stringValue decodes a typed placeholder's value, which must be a JSON
// string of at most MaxPathValue bytes without NUL.
func stringValue(raw json.RawMessage, what string) (string, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", &ArgumentError{Problem: "must be a string: it names a " + what}
	}
	switch {
	case s == "":
		return "", &ArgumentError{Problem: "must not be empty: it names a " + what}
	case len(s) > MaxPathValue:
		return "", &ArgumentError{Problem: fmt.Sprintf("is %d bytes long; a %s is at most %d", len(s), what, MaxPathValue)}
	case strings.ContainsRune(s, 0):
		return "", &ArgumentError{Problem: "must not contain NUL"}
	}
	return s, nil
}

// cleanSegments splits a path into its segments, lexically: empty
// segments and "." are dropped, ".." removes the segment before it and is
// refused where there is none (it would climb above the placeholder's
// place), and every segment left must be able to name one resource
// segment (segmentProblem).
func cleanSegments(p string) ([]string, error) {
	var segs []string
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(segs) == 0 {
				return nil, &ArgumentError{Problem: "must not climb above where it starts with '..'"}
			}
			segs = segs[:len(segs)-1]
			continue
		}
		if problem := segmentProblem(seg); problem != "" {
			return nil, &ArgumentError{Problem: fmt.Sprintf("has a segment %s that %s", shortQuote(seg), problem)}
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// fillPath fills a path placeholder. The value, absolute or relative, is
// cleaned lexically (cleanSegments). Without host, its segments follow
// the placeholder's place in the resource, and the cleaned path is
// forwarded, absolute if it was. With host, the cleaned path is resolved
// on this host, and the path it really leads to names the resource and
// is forwarded.
func fillPath(raw json.RawMessage, host HostPath) ([]string, json.RawMessage, error) {
	s, err := stringValue(raw, "path")
	if err != nil {
		return nil, nil, err
	}
	segs, err := cleanSegments(s)
	if err != nil {
		return nil, nil, err
	}
	cleaned := strings.Join(segs, "/")
	switch {
	case strings.HasPrefix(s, "/"):
		cleaned = "/" + cleaned
	case cleaned == "":
		cleaned = "."
	}
	if host == nil {
		return segs, quote(cleaned), nil
	}
	real, err := host(cleaned)
	if err != nil {
		return nil, nil, &ArgumentError{Problem: err.Error()}
	}
	if !strings.HasPrefix(real, "/") {
		return nil, nil, &ArgumentError{Problem: fmt.Sprintf("resolves to %s, which is not an absolute path", shortQuote(real))}
	}
	if segs, err = cleanSegments(real); err != nil {
		return nil, nil, &ArgumentError{Problem: fmt.Sprintf("leads to %s, which %s", shortQuote(real), err.(*ArgumentError).Problem)}
	}
	return segs, quote("/" + strings.Join(segs, "/")), nil
}

// fillURL fills a URL placeholder: an http or https URL without
// userinfo, naming a host by name (not an IP address). It names
// "/<host>/<path segments>": the host lowercased and converted to ASCII
// (IDNA), with ":<port>" unless the port is the scheme's default, then
// the path's segments, percent-decoded and cleaned as a path's are. What
// is forwarded is that URL written anew, with the query as given and
// without the fragment.
func fillURL(raw json.RawMessage) ([]string, json.RawMessage, error) {
	s, err := stringValue(raw, "URL")
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, nil, &ArgumentError{Problem: "is not a URL"}
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return nil, nil, &ArgumentError{Problem: "must be an http or https URL"}
	case u.Opaque != "" || u.Host == "":
		return nil, nil, &ArgumentError{Problem: "must name a host (http://host/...)"}
	case u.User != nil:
		return nil, nil, &ArgumentError{Problem: "must not carry a user name or password"}
	}
	host, err := urlHost(u.Hostname())
	if err != nil {
		return nil, nil, err
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, nil, &ArgumentError{Problem: "has a port that is not 1-65535"}
		}
		if !(scheme == "http" && n == 80 || scheme == "https" && n == 443) {
			host += ":" + strconv.Itoa(n)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, nil, &ArgumentError{Problem: "has an empty port"}
	}
	var segs []string
	for _, esc := range strings.Split(u.EscapedPath(), "/") {
		seg, err := url.PathUnescape(esc)
		if err != nil {
			return nil, nil, &ArgumentError{Problem: "has a path with a bad percent escape"}
		}
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(segs) == 0 {
				return nil, nil, &ArgumentError{Problem: "must not climb above its host with '..'"}
			}
			segs = segs[:len(segs)-1]
			continue
		}
		if problem := segmentProblem(seg); problem != "" {
			return nil, nil, &ArgumentError{Problem: fmt.Sprintf("has a path segment %s that %s", shortQuote(seg), problem)}
		}
		segs = append(segs, seg)
	}
	out := url.URL{Scheme: scheme, Host: host, Path: "/" + strings.Join(segs, "/"), RawQuery: u.RawQuery}
	if len(segs) > 0 && strings.HasSuffix(u.Path, "/") {
		out.Path += "/"
	}
	return append([]string{host}, segs...), quote(out.String()), nil
}

// urlHost is a URL's host name as the resource names it: lowercased and
// converted to ASCII by IDNA's lookup rules (UTS 46), refused when it is
// an IP address (v4, v6, or a number some resolvers read as one) or not
// a valid name.
func urlHost(h string) (string, error) {
	if _, err := netip.ParseAddr(h); err == nil || strings.HasPrefix(h, "[") {
		return "", &ArgumentError{Problem: "must name its host by name, not by IP address"}
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil || a == "" {
		return "", &ArgumentError{Problem: fmt.Sprintf("has a host %s that is not a valid name", shortQuote(h))}
	}
	a = strings.ToLower(strings.TrimSuffix(a, "."))
	labels := strings.Split(a, ".")
	if last := labels[len(labels)-1]; last == "" || strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		// 127.1, 2130706433 and 0x7f.1 are addresses to some resolvers.
		return "", &ArgumentError{Problem: "must name its host by name, not by IP address"}
	}
	return a, nil
}

// quote encodes s as a JSON string, without HTML escaping.
func quote(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// shortQuote quotes s for a message, cut at 64 bytes.
func shortQuote(s string) string {
	if len(s) > 64 {
		i := 64
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		return strconv.Quote(s[:i]) + "…"
	}
	return strconv.Quote(s)
}
