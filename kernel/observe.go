package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/telemetry"
	"github.com/sharedos/sharedos-mcp/policy"
)

// What the kernel tells beyond its answers: what the audit records of a
// call's arguments, the config each decision was made under, and the
// telemetry of a call.

// argumentsRecord is what the audit records of one call's arguments.
type argumentsRecord struct {
	digest string          // SHA-256 (hex) of their canonical JSON
	full   json.RawMessage // that JSON itself, under "full", when it fits
}

// recordArguments is what mode ([audit] arguments) records of a call's
// arguments. Arguments that were not kept (over the size limit, or never
// read) and arguments without a canonical form are recorded by nothing.
// A call without arguments is recorded as arguments {}, as it runs.
func recordArguments(mode string, a boundedJSON) argumentsRecord {
	if mode == config.ArgumentsNone || a.raw == nil && a.size != 0 {
		return argumentsRecord{}
	}
	raw := a.raw
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if mode != config.ArgumentsFull {
		sum, err := hashing.CanonicalSHA256(raw)
		if err != nil {
			return argumentsRecord{}
		}
		return argumentsRecord{digest: hexString(sum)}
	}
	c, err := hashing.CanonicalJSON(raw)
	if err != nil {
		return argumentsRecord{}
	}
	// c is canonical already: its digest is the one digest mode records.
	r := argumentsRecord{digest: hexString(sha256.Sum256(c))}
	if len(c) <= audit.MaxArguments {
		r.full = c
	}
	return r
}

// hexString is sum in hex, in one allocation.
func hexString(sum [sha256.Size]byte) string {
	var b [2 * sha256.Size]byte
	hex.Encode(b[:], sum[:])
	return string(b[:])
}

// recordConfig records next as the config in force: at start against
// none, on a reload against prev. A kernel that cannot record the config
// it runs on says so; its decisions would have no record of their grants.
func (s *Server) recordConfig(reason string, prev, next config.Config) bool {
	ch := config.Diff(prev, next)
	return s.record(audit.Event{
		Time: audit.Stamp(s.now()), Event: audit.EventConfigLoaded, Reason: reason,
		Peer:   audit.Peer{UID: uint32(os.Getuid()), PID: os.Getpid()},
		Config: next.File, SHA256: next.SHA256,
		Added: ch.Added, Removed: ch.Removed, Changed: ch.Changed,
	})
}

// upstreamStates is what the sharedos.upstream.state gauge reads.
func (s *Server) upstreamStates() []telemetry.UpstreamState {
	set := s.brokers.set.Load()
	if set == nil {
		return nil
	}
	var out []telemetry.UpstreamState
	for _, name := range set.names {
		for _, st := range set.byName[name].m.Snapshot().Upstreams {
			out = append(out, telemetry.UpstreamState{Name: st.Name, State: string(st.State)})
		}
	}
	return out
}

// approvalsWaiting is what the sharedos.approvals.waiting gauge reads:
// the approval requests a person can still decide, the ones
// 'sharedos-mcp approvals' lists. A call held for one counts from its
// tool.approval.requested to its decision, and so does one answered
// approval_pending, whose request stays open until it expires. The lock
// it takes is held at most across one audit sync (a request or a
// decision being recorded), which delays a collection, never a call.
func (s *Server) approvalsWaiting() int {
	ap := &s.approvals
	ap.mu.Lock()
	defer ap.mu.Unlock()
	now := s.now()
	n := 0
	for _, a := range ap.byID {
		if a.state == approvalPending && now.Before(a.expiresAt) {
			n++
		}
	}
	return n
}

// grantNumber is the number kernel check shows the grant under ("#3" is
// 3) that allowed the call at the integration's own level; 0 when no
// grant allowed it.
func (d *decision) grantNumber() int {
	if d == nil || d.v.Decision != policy.Allowed || len(d.v.Levels) == 0 || d.v.Levels[0].Grant < 0 {
		return 0
	}
	return d.v.Levels[0].Grant + 1
}
