package kernel

import (
	"os"
	"path/filepath"
	"time"

	"github.com/sharedos/sharedos-mcp/kernel/status"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
	"github.com/sharedos/sharedos-mcp/policy"
)

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
	path := filepath.Join(s.StateDir, status.File)
	if len(set.names) == 0 {
		if _, err := os.Stat(path); err != nil {
			return
		}
	}
	r := status.Report{Written: s.now().UTC(), PID: os.Getpid(), Upstreams: []status.Upstream{}}
	for _, name := range set.names {
		m := set.byName[name].m
		snap := m.Snapshot()
		for _, st := range snap.Upstreams {
			r.Upstreams = append(r.Upstreams, upstreamState(st, snap))
		}
	}
	if err := status.Write(path, r); err != nil {
		s.Log.Warn().Err(err).Msg("write upstream status; doctor and catalog may show an older one")
	}
}

func upstreamState(st upstream.Status, snap *upstream.Snapshot) status.Upstream {
	u := status.Upstream{
		Name: st.Name, State: string(st.State), Reason: st.Reason, Since: st.Since.UTC(), PID: st.PID,
		Server: st.Server, Restarts: st.Restarts, Stderr: st.Stderr,
		Transport: st.Transport, URL: st.URL,
		Published: []status.Published{}, Withheld: []status.Withheld{},
	}
	if a := st.Auth; a != nil {
		u.Auth = &status.Auth{Method: a.Method, LoggedIn: a.LoggedIn, CanRefresh: a.CanRefresh, Required: a.Required}
		if !a.Expiry.IsZero() {
			u.Auth.Expiry = a.Expiry.UTC()
		}
	}
	if !st.Retry.IsZero() {
		u.Retry = st.Retry.UTC()
	}
	for _, t := range snap.Tools {
		if t.Upstream == st.Name {
			u.Published = append(u.Published, status.Published{Name: t.Name, Action: t.Action, Resource: t.Upstream + ":" + t.Resource.String(), Arguments: statusArguments(t.Arguments)})
		}
	}
	for _, w := range snap.Withheld {
		if w.Upstream == st.Name {
			u.Withheld = append(u.Withheld, status.Withheld{Name: w.Name, Reason: w.Reason, Detail: w.Detail, Changed: w.Changed})
		}
	}
	return u
}

// statusArguments is what the status file says of a tool's placeholders'
// arguments.
func statusArguments(args []upstream.Argument) []status.Argument {
	var out []status.Argument
	for _, a := range args {
		kind := string(a.Kind)
		if a.Kind == policy.KindSegment {
			kind = "segment"
		}
		out = append(out, status.Argument{Name: a.Name, Kind: kind, Format: a.Format, Takes: a.Takes, By: a.By})
	}
	return out
}
