package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/privfile"
)

// PinsFile is the name of the pins file in the state directory.
const PinsFile = "upstream-pins.json"

// pinsLock is locked (flock) around every read-modify-write of the pins
// file, by the kernel and by Approve alike, so neither loses the other's
// change.
const pinsLock = "upstream-pins.lock"

const pinsVersion = 1

// Errors of the pins file and of Approve.
var (
	ErrUnsafePins      = errors.New("the pins file or its directory can be written by other users")
	ErrUnknownUpstream = errors.New("no tool of this upstream has been pinned")
	ErrUnknownTool     = errors.New("this tool has never been pinned")
	ErrNothingPending  = errors.New("nothing is quarantined")
	ErrNotReviewed     = errors.New("the pending definition is not the one named")
)

// MinHashPrefix is the fewest hex digits of a SHA-256 that Approve
// takes to name a definition.
const MinHashPrefix = 12

// NotReviewedError is an approval refused because the definition pending
// now is not the one the approver named (the upstream changed it again
// after it was reviewed).
type NotReviewedError struct {
	Upstream, Tool string
	Named          string   // the hex prefix the approver gave
	Pending        string   // SHA-256 of the definition pending now
	Changed        []string // the fields in which it differs from the pinned one
}

func (e *NotReviewedError) Error() string {
	return fmt.Sprintf("approve %s.%s: the definition pending now is %s, not %s", e.Upstream, e.Tool, e.Pending, e.Named)
}

func (e *NotReviewedError) Unwrap() error { return ErrNotReviewed }

// DefaultStateDir is $XDG_STATE_HOME/sharedos, else
// ~/.local/state/sharedos: where the kernel keeps its audit log and pins.
func DefaultStateDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sharedos"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither XDG_STATE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".local", "state", "sharedos"), nil
}

// pinFile is the pins file: for each upstream and tool, the definition
// pinned, and the one last seen that differs from it, if any.
type pinFile struct {
	Version   int                             `json:"version"`
	Upstreams map[string]map[string]*pinEntry `json:"upstreams"`
}

type pinEntry struct {
	Pinned  pinRecord  `json:"pinned"`
	Pending *pinRecord `json:"pending,omitempty"`
}

// pinRecord is one definition: its SHA-256 and its canonical JSON (kept
// so that what changed can be shown, not only that something did).
type pinRecord struct {
	SHA256     string          `json:"sha256"`
	Definition json.RawMessage `json:"definition"`
	Time       time.Time       `json:"time"` // when pinned, or when the pending one was first seen
	// Approved is set on a definition pinned by Approve rather than on
	// first sight. Until the kernel has recorded the approval in its audit
	// log (Recorded), the definition is not published: an approval takes
	// effect only once it is on the record.
	Approved *approvalMark `json:"approved,omitempty"`
}

// approvalMark is how a pinned definition came to be approved.
type approvalMark struct {
	Previous string   `json:"previous"` // SHA-256 of the definition pinned before
	Changed  []string `json:"changed"`  // the definition fields that differ from it
	Recorded bool     `json:"recorded"` // a kernel has recorded the approval in its audit log
}

func (f *pinFile) entry(up, tool string) *pinEntry {
	return f.Upstreams[up][tool]
}

func (f *pinFile) set(up, tool string, e *pinEntry) {
	if f.Upstreams == nil {
		f.Upstreams = map[string]map[string]*pinEntry{}
	}
	if f.Upstreams[up] == nil {
		f.Upstreams[up] = map[string]*pinEntry{}
	}
	f.Upstreams[up][tool] = e
}

// pinStore is the kernel's view of the pins file, reloaded when the file
// changes on disk (an approval by another process).
type pinStore struct {
	dir string

	mu   sync.Mutex
	file pinFile
	info fs.FileInfo // of the file last loaded; nil when there was none
}

func openPins(dir string) (*pinStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, err
	}
	s := &pinStore{dir: dir}
	if err := s.refresh(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *pinStore) path() string { return filepath.Join(s.dir, PinsFile) }

// refresh reloads the file if it is not the one last loaded: another
// inode (it is replaced by rename), another size or modification time.
// One stat when nothing changed.
func (s *pinStore) refresh() error {
	fi, err := os.Stat(s.path())
	if errors.Is(err, fs.ErrNotExist) {
		fi = nil
	} else if err != nil {
		return fmt.Errorf("stat pins: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sameFile(s.info, fi) {
		return nil
	}
	f, fi, err := loadPins(s.dir)
	if err != nil {
		return err
	}
	s.file, s.info = f, fi
	return nil
}

func sameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// verdict says whether def may be published: it is the pinned one, and
// if it was pinned by an approval, that approval is on the record.
// Otherwise it says what is pinned (nil if nothing) to compare with.
func (s *pinStore) verdict(up string, def *definition) (ok bool, pinned *pinRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.file.entry(up, def.name)
	if e == nil {
		return false, nil
	}
	p := e.Pinned
	return p.SHA256 == def.sha && (p.Approved == nil || p.Approved.Recorded), &p
}

// unrecorded returns the approvals of upstream up that no kernel has
// recorded yet, by tool name.
func (s *pinStore) unrecorded(up string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	tools := s.file.Upstreams[up]
	for _, name := range sortedKeys(tools) {
		p := tools[name].Pinned
		if p.Approved == nil || p.Approved.Recorded {
			continue
		}
		out = append(out, Event{
			Kind: EventToolPinned, Upstream: up, Tool: name, Reason: ReasonApproved,
			Hash: p.SHA256, Previous: p.Approved.Previous, Changed: slices.Clone(p.Approved.Changed), Time: p.Time,
		})
	}
	return out
}

// markRecorded notes that the approval of ev (from unrecorded) is in the
// audit log, if the tool is still pinned at that definition.
func (s *pinStore) markRecorded(ev Event) error {
	err := withPinsLock(s.dir, func() error {
		f, _, err := loadPins(s.dir)
		if err != nil {
			return err
		}
		e := f.entry(ev.Upstream, ev.Tool)
		if e == nil || e.Pinned.SHA256 != ev.Hash || e.Pinned.Approved == nil || e.Pinned.Approved.Recorded {
			return nil
		}
		e.Pinned.Approved.Recorded = true
		return writePins(s.dir, &f)
	})
	if err != nil {
		return err
	}
	return s.refresh()
}

// pinChange is what observe did to one tool.
type pinChange struct {
	tool     string
	kind     string // EventToolPinned or EventToolQuarantined
	hash     string
	previous string
	changed  []string
}

// observe records the definitions an upstream offers now: a tool seen
// for the first time is pinned, a definition that differs from its pin
// becomes (or stays) the tool's pending one, and a tool back at its pin
// loses its pending one. The file is written only when something changed,
// under the lock, from a fresh read.
func (s *pinStore) observe(up string, defs []*definition, now time.Time) ([]pinChange, error) {
	var changes []pinChange
	err := withPinsLock(s.dir, func() error {
		f, _, err := loadPins(s.dir)
		if err != nil {
			return err
		}
		dirty := false
		for _, d := range defs {
			rec := pinRecord{SHA256: d.sha, Definition: d.canonical, Time: now.UTC()}
			e := f.entry(up, d.name)
			switch {
			case e == nil:
				f.set(up, d.name, &pinEntry{Pinned: rec})
				changes = append(changes, pinChange{tool: d.name, kind: EventToolPinned, hash: d.sha})
				dirty = true
			case e.Pinned.SHA256 == d.sha:
				if e.Pending != nil {
					e.Pending = nil
					dirty = true
				}
			case e.Pending == nil || e.Pending.SHA256 != d.sha:
				e.Pending = &rec
				changes = append(changes, pinChange{
					tool: d.name, kind: EventToolQuarantined, hash: d.sha, previous: e.Pinned.SHA256,
					changed: changedFields(e.Pinned.Definition, d.canonical),
				})
				dirty = true
			}
		}
		if !dirty {
			return nil
		}
		return writePins(s.dir, &f)
	})
	if err != nil {
		return nil, err
	}
	return changes, s.refresh()
}

// Approval is one tool whose pending definition Approve pinned.
type Approval struct {
	Upstream, Tool string
	Previous, Hash string   // the SHA-256 pinned before, and the one pinned now
	Changed        []string // the definition fields that differ
}

// Approve pins, for the upstream, the pending definition of tool (every
// quarantined tool of the upstream when tool is ""), in the pins file of
// stateDir. With sha256 set (lowercase hex, a prefix of at least
// MinHashPrefix digits, or the whole), it pins tool's pending definition
// only if its SHA-256 starts with sha256, and otherwise fails with a
// *NotReviewedError: what is approved is what was reviewed, also when
// the upstream changed it in between; the check and the pin are made
// under the pins file's lock. A kernel running the upstream records each
// approval in its audit log (Options.RecordApproval) at its next
// snapshot, or when it next starts, and publishes the tool from then on.
// It fails with ErrUnknownUpstream or ErrUnknownTool for what was never
// pinned, and ErrNothingPending when there is nothing to approve.
func Approve(stateDir, upstream, tool, sha256 string, now time.Time) ([]Approval, error) {
	if sha256 != "" && (tool == "" || len(sha256) < MinHashPrefix) {
		return nil, fmt.Errorf("approve %s: a definition is named by its tool and at least %d hex digits of its SHA-256", upstream, MinHashPrefix)
	}
	var out []Approval
	err := withPinsLock(stateDir, func() error {
		f, _, err := loadPins(stateDir)
		if err != nil {
			return err
		}
		tools := f.Upstreams[upstream]
		if len(tools) == 0 {
			return fmt.Errorf("approve %s: %w", upstream, ErrUnknownUpstream)
		}
		names := []string{tool}
		if tool == "" {
			names = sortedKeys(tools)
		} else if tools[tool] == nil {
			return fmt.Errorf("approve %s.%s: %w", upstream, tool, ErrUnknownTool)
		}
		for _, n := range names {
			e := tools[n]
			if e.Pending == nil {
				continue
			}
			if sha256 != "" && !strings.HasPrefix(e.Pending.SHA256, sha256) {
				return &NotReviewedError{Upstream: upstream, Tool: n, Named: sha256, Pending: e.Pending.SHA256,
					Changed: changedFields(e.Pinned.Definition, e.Pending.Definition)}
			}
			out = append(out, Approval{
				Upstream: upstream, Tool: n, Previous: e.Pinned.SHA256, Hash: e.Pending.SHA256,
				Changed: changedFields(e.Pinned.Definition, e.Pending.Definition),
			})
			previous := e.Pinned.SHA256
			e.Pinned = *e.Pending
			e.Pinned.Time = now.UTC()
			e.Pinned.Approved = &approvalMark{Previous: previous, Changed: out[len(out)-1].Changed}
			e.Pending = nil
		}
		if len(out) == 0 {
			what := upstream
			if tool != "" {
				what += "." + tool
			}
			return fmt.Errorf("approve %s: %w", what, ErrNothingPending)
		}
		return writePins(stateDir, &f)
	})
	return out, err
}

// Quarantine is a tool whose current definition differs from its pin.
type Quarantine struct {
	Upstream, Tool  string
	Pinned, Pending string   // SHA-256 of each
	Changed         []string // the definition fields that differ
	Since           time.Time
	// The two definitions, as canonical JSON, for showing the difference.
	PinnedDefinition, PendingDefinition json.RawMessage
}

// Quarantined lists the quarantined tools recorded in stateDir's pins
// file, by upstream and tool name, without changing anything.
func Quarantined(stateDir string) ([]Quarantine, error) {
	f, _, err := loadPins(stateDir)
	if err != nil {
		return nil, err
	}
	var out []Quarantine
	for _, up := range sortedKeys(f.Upstreams) {
		for _, tool := range sortedKeys(f.Upstreams[up]) {
			e := f.Upstreams[up][tool]
			if e.Pending == nil {
				continue
			}
			q := Quarantine{
				Upstream: up, Tool: tool, Pinned: e.Pinned.SHA256, Pending: e.Pending.SHA256,
				Changed: changedFields(e.Pinned.Definition, e.Pending.Definition), Since: e.Pending.Time,
			}
			// The file holds them indented; a bad one is shown as it is.
			q.PinnedDefinition, err = hashing.CanonicalJSON(e.Pinned.Definition)
			if err != nil {
				q.PinnedDefinition = e.Pinned.Definition
			}
			q.PendingDefinition, err = hashing.CanonicalJSON(e.Pending.Definition)
			if err != nil {
				q.PendingDefinition = e.Pending.Definition
			}
			out = append(out, q)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// changedFields names the definition fields whose canonical JSON differs
// between two definitions, a field present in one only included. (The
// pins file is indented, so what it holds is compared in canonical form,
// not as read.)
func changedFields(a, b json.RawMessage) []string {
	var fa, fb map[string]json.RawMessage
	if json.Unmarshal(a, &fa) != nil || json.Unmarshal(b, &fb) != nil {
		return slices.Clone(definitionFields)
	}
	var out []string
	for _, k := range definitionFields {
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka != okb || oka && !sameJSON(va, vb) {
			out = append(out, k)
		}
	}
	return out
}

func sameJSON(a, b json.RawMessage) bool {
	ca, errA := hashing.CanonicalJSON(a)
	cb, errB := hashing.CanonicalJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

// loadPins reads the pins file of dir; a missing file is an empty one.
func loadPins(dir string) (pinFile, fs.FileInfo, error) {
	p := filepath.Join(dir, PinsFile)
	fd, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return pinFile{Version: pinsVersion}, nil, nil
	}
	if err != nil {
		return pinFile{}, nil, fmt.Errorf("open pins: %w", err)
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return pinFile{}, nil, fmt.Errorf("stat pins: %w", err)
	}
	if err := checkPrivateInfo(p, fi); err != nil {
		return pinFile{}, nil, err
	}
	var f pinFile
	dec := json.NewDecoder(fd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return pinFile{}, nil, fmt.Errorf("read pins %s: %w", p, err)
	}
	if f.Version != pinsVersion {
		return pinFile{}, nil, fmt.Errorf("read pins %s: version %d, this kernel reads version %d", p, f.Version, pinsVersion)
	}
	return f, fi, nil
}

// writePins replaces the pins file atomically (privfile.WriteAtomic).
func writePins(dir string, f *pinFile) error {
	f.Version = pinsVersion
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode pins: %w", err)
	}
	if err := privfile.WriteAtomic(dir, filepath.Join(dir, PinsFile), ".upstream-pins-*", append(data, '\n')); err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	return nil
}

// withPinsLock runs f holding an exclusive flock on the lock file of dir.
func withPinsLock(dir string, f func() error) error {
	if err := checkPrivate(dir); err != nil {
		return err
	}
	return privfile.Locked(filepath.Join(dir, pinsLock), f)
}

// checkPrivate refuses a state directory others could write to: whoever
// can replace the pins file can approve any definition.
func checkPrivate(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return checkPrivateInfo(dir, fi)
}

func checkPrivateInfo(p string, fi fs.FileInfo) error {
	if err := privfile.Check(fi, os.Getuid(), 0o022); err != nil {
		return fmt.Errorf("%s: %w: %w", p, err, ErrUnsafePins)
	}
	return nil
}
