// Package oauth gives the reference kernel the OAuth tokens of its remote
// upstreams (auth = "oauth"): Login runs the authorization code flow with
// PKCE against the authorization server the upstream advertises, once, in
// `sharedos-mcp kernel login`; the Store keeps the tokens in the kernel's
// state directory, readable by the kernel's uid only; a Source hands them
// to the upstream's HTTP client, refreshes them before they expire (with
// the RFC 8707 resource parameter), one refresh at a time, and after a
// refused refreshed token reports that a person has to log in again,
// never trying in a loop. Logout forgets them.
//
// Tokens are secrets: no error of this package holds one, and a Source
// gives each token it holds to the kernel's secret.Redactor.
package oauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/privfile"
)

// Dir is the directory of the state directory that holds the token
// files, one per upstream.
const Dir = "oauth"

const recordVersion = 1

// Record is what a login obtained for one upstream: the tokens and what it
// takes to refresh them.
type Record struct {
	Version  int    `json:"version"`
	Upstream string `json:"upstream"`
	// Resource is the MCP server's URL as its protected resource metadata
	// names it: the resource the tokens are for, sent again with every
	// refresh (RFC 8707).
	Resource string `json:"resource"`
	// TokenURL is the authorization server's token endpoint.
	TokenURL string `json:"token_endpoint"`
	ClientID string `json:"client_id"`
	// ClientSecret is a secret the authorization server gave a client
	// that registered itself; a configured client_secret is a [[secret]]
	// and is not stored here.
	ClientSecret string `json:"client_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint:
	// client_secret_basic, client_secret_post or none.
	AuthMethod   string    `json:"token_endpoint_auth_method"`
	Scopes       []string  `json:"scopes,omitempty"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"` // zero: the server did not say
	Obtained     time.Time `json:"obtained"`
}

// Errors of the store.
var (
	ErrNotLoggedIn      = errors.New("no login has been made for this upstream")
	ErrLoosePermissions = privfile.ErrLoosePermissions
	ErrNotOwned         = privfile.ErrNotOwned
)

// PermissionError is a token file or directory the Store refuses, with
// what to do about it.
type PermissionError struct {
	Path string
	Err  error  // ErrLoosePermissions or ErrNotOwned, with the details
	Fix  string // "chmod 600 FILE", "chmod 700 DIR", or "" when a person has to decide
}

func (e *PermissionError) Error() string {
	msg := fmt.Sprintf("%s: %v", e.Path, e.Err)
	if e.Fix != "" {
		msg += "; fix it with: " + e.Fix
	}
	return msg
}

func (e *PermissionError) Unwrap() error { return e.Err }

// Store keeps token records in <state directory>/oauth, a directory of
// mode 0700 holding one file of mode 0600 per upstream, both owned by the
// kernel's uid: anything else is refused, never read. Writes replace a
// file atomically, under a lock that the kernel's refreshes and a login in
// another process both take.
type Store struct {
	dir string
	uid int
}

// NewStore returns the store of stateDir; nothing is created before the
// first Save.
func NewStore(stateDir string) *Store {
	return &Store{dir: filepath.Join(stateDir, Dir), uid: os.Getuid()}
}

// Path is the file of upstream's tokens.
func (s *Store) Path(upstream string) string { return filepath.Join(s.dir, upstream+".json") }

// ErrBadUpstreamName is a name that cannot name a file of the directory.
var ErrBadUpstreamName = errors.New("an upstream's name cannot be empty, '.', '..' or hold '/' or NUL")

func checkName(upstream string) error {
	if upstream == "" || upstream == "." || upstream == ".." || strings.ContainsAny(upstream, "/\x00") {
		return fmt.Errorf("%q: %w", upstream, ErrBadUpstreamName)
	}
	return nil
}

// Load returns upstream's record, and the file's information to tell a
// later change (a new login) by; ErrNotLoggedIn when there is none.
func (s *Store) Load(upstream string) (*Record, fs.FileInfo, error) {
	if err := checkName(upstream); err != nil {
		return nil, nil, err
	}
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, ErrNotLoggedIn
		}
		return nil, nil, err
	}
	p := s.Path(upstream)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, ErrNotLoggedIn
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if err := s.checkPrivate(p, fi, 0o077, "chmod 600 "+p); err != nil {
		return nil, nil, err
	}
	var r Record
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, nil, fmt.Errorf("read %s: it is not a token record (%s)", p, decodeProblem(err))
	}
	if r.Version != recordVersion || r.Upstream != upstream {
		return nil, nil, fmt.Errorf("read %s: version %d of upstream %q, this kernel reads version %d of %q", p, r.Version, r.Upstream, recordVersion, upstream)
	}
	return &r, fi, nil
}

// decodeProblem says what is wrong with a file that does not decode,
// without quoting it: encoding/json quotes values, and the file holds
// tokens.
func decodeProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("bad JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s has the wrong type", typ.Field)
	}
	return "unexpected content"
}

// Stat returns the information of upstream's file, nil when there is
// none: one stat, for a Source to tell whether a login replaced it.
func (s *Store) Stat(upstream string) (fs.FileInfo, error) {
	fi, err := os.Stat(s.Path(upstream))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fi, err
}

// Save writes r as its upstream's record, replacing any. With keep set,
// the record is written only if keep approves of the one on disk (nil when
// there is none), read under the lock: a refresh does not overwrite a
// login made meanwhile.
func (s *Store) Save(r *Record, keep func(onDisk *Record) bool) (written bool, err error) {
	if err := checkName(r.Upstream); err != nil {
		return false, err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return false, fmt.Errorf("create %s: %w", s.dir, err)
	}
	if err := s.checkDir(); err != nil {
		return false, err
	}
	err = s.locked(r.Upstream, func() error {
		if keep != nil {
			onDisk, _, err := s.Load(r.Upstream)
			if err != nil && !errors.Is(err, ErrNotLoggedIn) {
				return err
			}
			if !keep(onDisk) {
				return nil
			}
		}
		c := *r
		c.Version = recordVersion
		data, err := json.MarshalIndent(&c, "", "  ")
		if err != nil {
			return err
		}
		if err := privfile.WriteAtomic(s.dir, s.Path(r.Upstream), ".tokens-*", append(data, '\n')); err != nil {
			return err
		}
		written = true
		return nil
	})
	return written, err
}

// Delete forgets upstream's record; it reports whether there was one.
func (s *Store) Delete(upstream string) (bool, error) {
	if err := checkName(upstream); err != nil {
		return false, err
	}
	if err := s.checkDir(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	var existed bool
	err := s.locked(upstream, func() error {
		err := os.Remove(s.Path(upstream))
		switch {
		case err == nil:
			existed = true
		case errors.Is(err, fs.ErrNotExist):
		default:
			return err
		}
		return privfile.SyncDir(s.dir)
	})
	return existed, err
}

// checkDir refuses a token directory others could read or write, or that
// is not the kernel's uid's.
func (s *Store) checkDir() error {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return err
	}
	return s.checkPrivate(s.dir, fi, 0o077, "chmod 700 "+s.dir)
}

func (s *Store) checkPrivate(p string, fi fs.FileInfo, forbidden fs.FileMode, fix string) error {
	err := privfile.Check(fi, s.uid, forbidden)
	switch {
	case errors.Is(err, ErrLoosePermissions):
		return &PermissionError{Path: p, Err: err, Fix: fix}
	case err != nil:
		return &PermissionError{Path: p, Err: err}
	}
	return nil
}

// locked runs f holding an exclusive flock on upstream's lock file.
func (s *Store) locked(upstream string, f func() error) error {
	return privfile.Locked(filepath.Join(s.dir, upstream+".lock"), f)
}
