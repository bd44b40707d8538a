// Package cli holds what every subcommand shares: its standard streams,
// errors that carry a hint for the user, and the logger.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"
)

// IO is a subcommand's view of the process's standard streams. Tests swap
// them for buffers.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Error is an error with a line telling the user what to do about it.
type Error struct {
	Err  error
	Hint string
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Hintf wraps err with a hint.
func Hintf(err error, format string, args ...any) error {
	return &Error{Err: err, Hint: fmt.Sprintf(format, args...)}
}

// UsageError is a mistake in the command line itself; the process exits 2.
type UsageError struct{ Msg, Hint string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a UsageError.
func Usagef(hint, format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// Report writes err to w as the one user-facing line (and its hint) and
// returns the exit code the process should use.
func Report(w io.Writer, prog string, err error) int {
	code := 1
	var hint string
	var ue *UsageError
	var he *Error
	switch {
	case errors.As(err, &ue):
		code, hint = 2, ue.Hint
	case errors.As(err, &he):
		hint = he.Hint
	}
	fmt.Fprintf(w, "%s: error: %s\n", prog, oneLine(err.Error()))
	if hint != "" {
		fmt.Fprintf(w, "hint: %s\n", oneLine(hint))
	}
	return code
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// LogOptions are the logging flags serve and kernel share.
type LogOptions struct {
	Level string // zerolog level name; "" means info
	File  string // "" means stderr
	// Filter, when set, wraps the log's writer: the kernel runs its log
	// through its secret redactor. It is given whole lines.
	Filter func(io.Writer) io.Writer
}

// NewLogger returns a logger writing JSON lines to opts.File (created 0600)
// or to stderr. The returned close function must be called on exit.
func NewLogger(opts LogOptions, stderr io.Writer) (zerolog.Logger, func() error, error) {
	level := zerolog.InfoLevel
	if opts.Level != "" {
		l, err := zerolog.ParseLevel(opts.Level)
		if err != nil || opts.Level != l.String() {
			return zerolog.Nop(), nil, Usagef("use one of trace, debug, info, warn, error, disabled", "unknown log level %q", opts.Level)
		}
		level = l
	}
	w, closeFn := stderr, func() error { return nil }
	if opts.File != "" {
		f, err := os.OpenFile(opts.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return zerolog.Nop(), nil, Hintf(fmt.Errorf("open log file: %w", err), "pick a --log-file in a directory you can write")
		}
		w, closeFn = f, f.Close
	}
	if opts.Filter != nil {
		w = opts.Filter(w)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), closeFn, nil
}

// Warn writes a warning: something the user should fix, though the
// command went on. It has the shape of Report's error lines.
func Warn(w io.Writer, prog, msg, hint string) {
	fmt.Fprintf(w, "%s: warning: %s\n", prog, oneLine(msg))
	if hint != "" {
		fmt.Fprintf(w, "hint: %s\n", oneLine(hint))
	}
}
