package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/policy"
)

// TestTheConfigIsOnTheRecord: the kernel records the config it starts
// on, and each reloaded one with what it changes, before any decision is
// made under it; a reload it cannot record does not apply.
func TestTheConfigIsOnTheRecord(t *testing.T) {
	reader := grant(t, "integration:cc", "files:/public", true, "read")
	cfg := config.Config{File: "/etc/k.toml", SHA256: strings.Repeat("ab", 32), Grants: []policy.Grant{reader}, Arguments: config.ArgumentsDigest}
	sink := &failingSink{failOn: audit.EventConfigLoaded}
	h := startKernel(t, cfg.Grants, func(s *Server) { s.Config = cfg }, failing(sink))
	c := h.dial()
	c.hello("cc")
	c.list()
	c.invoke("files.read", map[string]string{"path": "/public/a.txt"})

	writer := grant(t, "integration:cc", "files:/public", true, "write")
	next := cfg
	next.SHA256, next.Grants = strings.Repeat("cd", 32), []policy.Grant{writer}
	if r, err := h.srv.Reload(next); err != nil || !r.Applied {
		t.Fatalf("Reload = %+v, %v", r, err)
	}
	sink.fail.Store(true)
	refused := next
	refused.Grants = nil
	if r, err := h.srv.Reload(refused); err == nil || r.Applied {
		t.Errorf("a reload that could not be recorded: %+v, %v; want it refused", r, err)
	}
	if g := h.srv.currentPolicy().Grants; len(g) != 1 || !slices.Equal(g[0].Actions, []string{"write"}) {
		t.Errorf("grants after a refused reload: %+v; want the recorded reload's", g)
	}
	sink.fail.Store(false)
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	var loaded []audit.Event
	evs := h.allEvents()
	for i, e := range evs {
		if e.Event == audit.EventConfigLoaded {
			loaded = append(loaded, e)
			if len(loaded) == 1 && i != 0 {
				t.Errorf("the config is event %d; want it first, before any turn", i+1)
			}
		}
	}
	if len(loaded) != 2 {
		t.Fatalf("%d config.loaded events, want 2 (start, reload)", len(loaded))
	}
	start, reload := loaded[0], loaded[1]
	if start.Reason != "start" || start.Config != cfg.File || start.SHA256 != cfg.SHA256 || start.ExecutionID != "" ||
		!slices.Equal(start.Added, []string{config.GrantText(reader), "audit arguments digest"}) || start.Peer.PID != os.Getpid() {
		t.Errorf("at start: %+v", start)
	}
	if reload.Reason != "reload" || reload.SHA256 != next.SHA256 ||
		!slices.Equal(reload.Added, []string{config.GrantText(writer)}) || !slices.Equal(reload.Removed, []string{config.GrantText(reader)}) {
		t.Errorf("on reload: %+v", reload)
	}
}

// TestArgumentsAreRecordedAsTheConfigSays: by default the audit holds a
// digest of each call's arguments and none of their values ("audit every
// call; never log arguments"); "full" holds them too, "none" neither.
func TestArgumentsAreRecordedAsTheConfigSays(t *testing.T) {
	const secret = "the-content-nobody-may-read-in-the-log"
	write := map[string]string{"path": "/public/n.txt", "content": secret}
	canonical, err := hashing.CanonicalJSON([]byte(`{"path":"/public/n.txt","content":"` + secret + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canonical)
	digest := hex.EncodeToString(sum[:])
	for _, mode := range []string{"", config.ArgumentsDigest, config.ArgumentsFull, config.ArgumentsNone} {
		t.Run("mode "+mode, func(t *testing.T) {
			h := startKernel(t, writerGrants(t), func(s *Server) { s.Config.Arguments = mode })
			c := h.dial()
			c.hello("cc")
			c.list()
			if r := c.invoke("files.write", write); r.Status != kproto.StatusSucceeded {
				t.Fatalf("write: %+v", r)
			}
			c.conn.Close()
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(h.auditPath)
			if err != nil {
				t.Fatal(err)
			}
			if leaked := strings.Contains(string(data), secret); leaked != (mode == config.ArgumentsFull) {
				t.Errorf("the content is in the log: %v", leaked)
			}
			evs := h.events()
			for _, name := range []string{audit.EventToolAuthorized, audit.EventToolInvoked} {
				e := eventsNamed(evs, name)[0]
				switch mode {
				case config.ArgumentsNone:
					if e.ArgumentsDigest != "" || e.Arguments != nil {
						t.Errorf("%s records arguments: %+v", name, e)
					}
				case config.ArgumentsFull:
					if e.ArgumentsDigest != digest || string(e.Arguments) != string(canonical) {
						t.Errorf("%s: %s, %s; want the digest and %s", name, e.ArgumentsDigest, e.Arguments, canonical)
					}
				default:
					if e.ArgumentsDigest != digest || e.Arguments != nil {
						t.Errorf("%s: %s, %s; want the digest %s alone", name, e.ArgumentsDigest, e.Arguments, digest)
					}
				}
			}
		})
	}
}

// TestATurnThatOnlyLookedIsMarked: turn.closed counts the turn's calls,
// so a health check (hello and a listing, as claude mcp list, doctor and
// catalog make) can be told from a turn that acted.
func TestATurnThatOnlyLookedIsMarked(t *testing.T) {
	h := startKernel(t, writerGrants(t))
	look := h.dial()
	lookTurn := look.hello("cc")
	look.list()
	look.conn.Close()
	act := h.dial()
	actTurn := act.hello("cc")
	act.list()
	act.invoke("files.read", map[string]string{"path": "/public/a.txt"})
	act.invoke("files.nope", map[string]string{})
	act.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, e := range eventsNamed(h.events(), audit.EventTurnClosed) {
		if e.Calls == nil {
			t.Fatalf("turn.closed without calls: %+v", e)
		}
		calls[e.ExecutionID] = *e.Calls
	}
	if calls[lookTurn.ExecutionID] != 0 || calls[actTurn.ExecutionID] != 2 {
		t.Errorf("calls %v; want 0 for %s and 2 for %s", calls, lookTurn.ExecutionID, actTurn.ExecutionID)
	}
}
