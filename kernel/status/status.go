// Package status is what a running kernel says about its upstreams
// outside the socket: a file in its state directory (File) that doctor,
// catalog and kernel check read. The kernel rewrites it whole (write,
// rename) whenever an upstream changes state or lists its tools again.
package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// File is the file, in the state directory, where a running kernel says
// how its upstreams are: their states, the tools they publish and those
// they do not, and why.
const File = "upstream-status.json"

// Report is the content of File.
type Report struct {
	Written   time.Time  `json:"written"`
	PID       int        `json:"pid"` // the kernel that wrote it
	Upstreams []Upstream `json:"upstreams"`
}

// Upstream is one upstream as the kernel last saw it.
type Upstream struct {
	Name     string    `json:"name"`
	State    string    `json:"state"` // starting, ready, failed, restarting, stopped
	Reason   string    `json:"reason,omitempty"`
	Since    time.Time `json:"since"`
	Retry    time.Time `json:"retry,omitzero"`
	PID      int       `json:"pid,omitempty"`
	Server   string    `json:"server,omitempty"`
	Restarts int       `json:"restarts,omitempty"`
	Stderr   []string  `json:"stderr,omitempty"` // its last lines of stderr

	Transport string `json:"transport,omitempty"` // "stdio" or "streamable-http"; "" from a kernel before remote upstreams
	URL       string `json:"url,omitempty"`       // a remote upstream's URL, without its query
	Auth      *Auth  `json:"auth,omitempty"`      // a remote upstream's credentials

	Published []Published `json:"published"`
	Withheld  []Withheld  `json:"withheld"`
}

// Auth is how a remote upstream authenticates, never with a credential
// in it.
type Auth struct {
	Method string `json:"method"` // "oauth" (kernel login), "headers" (configured, secrets in them) or "none"
	// OAuth: a login's tokens are there, the access token is good until
	// Expiry (zero: the server did not say), and it can be refreshed.
	LoggedIn   bool      `json:"loggedIn,omitempty"`
	Expiry     time.Time `json:"expiry,omitzero"`
	CanRefresh bool      `json:"canRefresh,omitempty"`
	// Required says why a person has to act (log in again, renew a
	// secret); "" when nothing is.
	Required string `json:"required,omitempty"`
}

// Published is a tool an upstream publishes, and how calls to it are
// authorized: the action, and the resource (a template) in the
// upstream's namespace.
type Published struct {
	Name     string `json:"name"` // "<upstream>.<tool>"
	Action   string `json:"action"`
	Resource string `json:"resource"` // "<upstream>:/path/{arg}"
	// Arguments says what the tool's input schema holds for each
	// placeholder of Resource, in its order.
	Arguments []Argument `json:"arguments,omitempty"`
}

// Argument is what a published tool's input schema says of the argument
// a placeholder of its resource names.
type Argument struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`             // the placeholder's: "segment" ({name}), "path" or "url"
	Format string `json:"format,omitempty"` // the argument's format in the schema
	// Takes is "path" or "url" when the schema reads as the argument
	// taking one; By says what in the schema says so: "format", "name"
	// or "description".
	Takes string `json:"takes,omitempty"`
	By    string `json:"by,omitempty"`
}

// Withheld is a tool an upstream offers, or the config names, that is
// not published, and why (one of the upstream.Reason constants).
type Withheld struct {
	Name    string   `json:"name"`
	Reason  string   `json:"reason"`
	Detail  string   `json:"detail"`
	Changed []string `json:"changed,omitempty"`
}

// ErrNoReport is Read's error when no kernel has written a report in the
// state directory.
var ErrNoReport = errors.New("no kernel has reported on its upstreams here")

// Read reads the report a kernel wrote in stateDir.
func Read(stateDir string) (Report, error) {
	var r Report
	data, err := os.ReadFile(filepath.Join(stateDir, File))
	if errors.Is(err, os.ErrNotExist) {
		return r, ErrNoReport
	}
	if err != nil {
		return r, fmt.Errorf("read upstream status: %w", err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("read upstream status %s: %w", filepath.Join(stateDir, File), err)
	}
	return r, nil
}

// Write writes r as JSON to a new file beside path (0600) and renames it
// over path, so a reader sees the old file or the new one.
func Write(path string, r Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".upstream-status-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // nothing by this name after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
