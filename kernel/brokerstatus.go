package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// UpstreamStatusFile is the file, in the state directory, where a running
// kernel says how its upstreams are: their states, the tools they
// publish and those they do not, and why. doctor, catalog and kernel
// check read it; the kernel rewrites it whole (write, rename) whenever
// an upstream changes state or lists its tools again.
const UpstreamStatusFile = "upstream-status.json"

// UpstreamReport is the content of UpstreamStatusFile.
type UpstreamReport struct {
	Written   time.Time       `json:"written"`
	PID       int             `json:"pid"` // the kernel that wrote it
	Upstreams []UpstreamState `json:"upstreams"`
}

// UpstreamState is one upstream as the kernel last saw it.
type UpstreamState struct {
	Name     string    `json:"name"`
	State    string    `json:"state"` // starting, ready, failed, restarting, stopped
	Reason   string    `json:"reason,omitempty"`
	Since    time.Time `json:"since"`
	Retry    time.Time `json:"retry,omitzero"`
	PID      int       `json:"pid,omitempty"`
	Server   string    `json:"server,omitempty"`
	Restarts int       `json:"restarts,omitempty"`
	Stderr   []string  `json:"stderr,omitempty"` // its last lines of stderr

	Published []BrokeredTool `json:"published"`
	Withheld  []WithheldTool `json:"withheld"`
}

// BrokeredTool is a tool an upstream publishes, and how calls to it are
// authorized: the action, and the resource (a template) in the
// upstream's namespace.
type BrokeredTool struct {
	Name     string `json:"name"` // "<upstream>.<tool>"
	Action   string `json:"action"`
	Resource string `json:"resource"` // "<upstream>:/path/{arg}"
}

// WithheldTool is a tool an upstream offers, or the config names, that is
// not published, and why (one of the upstream.Reason constants).
type WithheldTool struct {
	Name    string   `json:"name"`
	Reason  string   `json:"reason"`
	Detail  string   `json:"detail"`
	Changed []string `json:"changed,omitempty"`
}

// ErrNoUpstreamReport is ReadUpstreamReport's error when no kernel has
// written a report in the state directory.
var ErrNoUpstreamReport = errors.New("no kernel has reported on its upstreams here")

// ReadUpstreamReport reads the report a kernel wrote in stateDir.
func ReadUpstreamReport(stateDir string) (UpstreamReport, error) {
	var r UpstreamReport
	data, err := os.ReadFile(filepath.Join(stateDir, UpstreamStatusFile))
	if errors.Is(err, os.ErrNotExist) {
		return r, ErrNoUpstreamReport
	}
	if err != nil {
		return r, fmt.Errorf("read upstream status: %w", err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("read upstream status %s: %w", filepath.Join(stateDir, UpstreamStatusFile), err)
	}
	return r, nil
}

// kickStatus asks for the status file to be written again; it never
// blocks.
func (s *Server) kickStatus() {
	if k := s.brokers.kick; k != nil {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// writeStatusLoop writes the status file each time it is kicked, until
// the upstreams are closed. Writes are at least statusInterval apart, so
// an upstream flooding list changes costs one write a second.
func (s *Server) writeStatusLoop() {
	b := &s.brokers
	for {
		select {
		case <-b.kick:
		case <-b.stopped:
			return
		}
		s.writeStatus()
		t := time.NewTimer(statusInterval)
		select {
		case <-t.C:
		case <-b.stopped:
			t.Stop()
			return
		}
	}
}

const statusInterval = 250 * time.Millisecond

// writeStatus writes the status file now. A kernel that has never run an
// upstream writes none; one whose upstreams were all removed writes an
// empty report, so nothing stale is shown.
func (s *Server) writeStatus() {
	set := s.brokers.set.Load()
	if s.StateDir == "" || set == nil {
		return
	}
	path := filepath.Join(s.StateDir, UpstreamStatusFile)
	if len(set.names) == 0 {
		if _, err := os.Stat(path); err != nil {
			return
		}
	}
	r := UpstreamReport{Written: s.now().UTC(), PID: os.Getpid(), Upstreams: []UpstreamState{}}
	for _, name := range set.names {
		m := set.byName[name].m
		snap := m.Snapshot()
		for _, st := range snap.Upstreams {
			r.Upstreams = append(r.Upstreams, upstreamState(st, snap))
		}
	}
	if err := writeFileAtomic(path, r); err != nil {
		s.Log.Warn().Err(err).Msg("write upstream status; doctor and catalog may show an older one")
	}
}

func upstreamState(st upstream.Status, snap *upstream.Snapshot) UpstreamState {
	u := UpstreamState{
		Name: st.Name, State: string(st.State), Reason: st.Reason, Since: st.Since.UTC(), PID: st.PID,
		Server: st.Server, Restarts: st.Restarts, Stderr: st.Stderr,
		Published: []BrokeredTool{}, Withheld: []WithheldTool{},
	}
	if !st.Retry.IsZero() {
		u.Retry = st.Retry.UTC()
	}
	for _, t := range snap.Tools {
		if t.Upstream == st.Name {
			u.Published = append(u.Published, BrokeredTool{Name: t.Name, Action: t.Action, Resource: t.Upstream + ":" + t.Resource.String()})
		}
	}
	for _, w := range snap.Withheld {
		if w.Upstream == st.Name {
			u.Withheld = append(u.Withheld, WithheldTool{Name: w.Name, Reason: w.Reason, Detail: w.Detail, Changed: w.Changed})
		}
	}
	return u
}

// writeFileAtomic writes v as JSON to a new file beside path (0600) and
// renames it over path, so a reader sees the old file or the new one.
func writeFileAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
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
