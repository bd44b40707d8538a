package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Audit event names.
const (
	EventTurnOpened    = "turn.opened"
	EventTurnRefused   = "turn.refused"
	EventCatalogListed = "tool.catalog.listed"
	EventToolInvoked   = "tool.invoked"
	EventTurnEscalated = "turn.escalated"
	EventTurnClosed    = "turn.closed"
)

// AuditPeer is the socket peer as the operating system reported it.
type AuditPeer struct {
	UID uint32 `json:"uid"`
	PID int    `json:"pid"`
}

// Event is one line of the audit record. The first five fields are on
// every event; the rest belong to particular events and are left out when
// empty.
type Event struct {
	Time        string    `json:"time"` // RFC 3339, nanoseconds, UTC
	Event       string    `json:"event"`
	ExecutionID string    `json:"executionId"`
	Integration string    `json:"integration"`
	Peer        AuditPeer `json:"peer"`

	CallID      string `json:"callId,omitempty"`
	Tool        string `json:"tool,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Requested   string `json:"requested,omitempty"` // the resource as the call named it, when a link led elsewhere
	Action      string `json:"action,omitempty"`
	Status      string `json:"status,omitempty"`
	Code        string `json:"code,omitempty"`
	CatalogHash string `json:"catalogHash,omitempty"`
	DurationUs  *int64 `json:"durationUs,omitempty"`
	Count       *int   `json:"count,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Note        string `json:"note,omitempty"`
}

// AuditLog appends events to a JSON Lines file.
//
// Each event is one write(2) of one whole line to a file opened O_APPEND,
// under a mutex: concurrent turns never interleave inside a line, and a
// crash leaves at most a missing last line, never a torn one in the middle.
// Lines are built by encoding/json, which escapes control characters, so
// no string a client sends (a tool name, a reason) can start a new line.
// Durability is per turn: Sync is called when a turn closes (see
// docs/adr/0002-audit-durability.md).
type AuditLog struct {
	mu  sync.Mutex
	f   *os.File
	err error // first write error; later writes are not attempted
}

// OpenAuditLog opens (creating, 0600, in a 0700 directory) the audit file.
func OpenAuditLog(path string) (*AuditLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create audit directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &AuditLog{f: f}, nil
}

// Write appends ev as one line. An event that cannot be recorded is an
// error the caller must not ignore: the kernel stops serving rather than
// act unrecorded.
func (a *AuditLog) Write(ev Event) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode audit event: %w", err)
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	if _, err := a.f.Write(line); err != nil {
		a.err = fmt.Errorf("write audit log: %w", err)
		return a.err
	}
	return nil
}

// Sync makes every event written so far durable. It does not hold the
// write lock: other turns keep appending while the disk flushes.
func (a *AuditLog) Sync() error {
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("sync audit log: %w", err)
	}
	return nil
}

// Close syncs and closes the file.
func (a *AuditLog) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.Sync(), a.f.Close())
}

// DefaultAuditPath is $XDG_STATE_HOME/sharedos/audit.jsonl, else
// ~/.local/state/sharedos/audit.jsonl.
func DefaultAuditPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sharedos", "audit.jsonl"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".local", "state", "sharedos", "audit.jsonl"), nil
}

// stamp formats t for an event's time field.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
