// Package cli holds what every subcommand shares: its standard streams,
// errors that carry a hint for the user, and the logger.
package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
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
	code, hint := 1, ""
	var ue *UsageError
	var he *Error
	switch {
	case errors.As(err, &ue):
		code, hint = 2, ue.Hint
	case errors.As(err, &he):
		hint = he.Hint
	}
	var r *reported
	if errors.As(err, &r) {
		return code
	}
	for _, p := range Problems(err) {
		fmt.Fprintf(w, "%s: error: %s\n", prog, p)
	}
	if hint != "" {
		fmt.Fprintf(w, "hint: %s\n", oneLine(hint))
	}
	return code
}

// Problems is err as the lines a user reads: one per problem when err
// reports several (a config file with three mistakes, say, found in one
// reading), else err's message on one line; in Words either way.
func Problems(err error) []string {
	var ps interface{ Problems() []error }
	if errors.As(err, &ps) {
		if list := ps.Problems(); len(list) > 1 {
			lines := make([]string, len(list))
			for i, p := range list {
				lines[i] = oneLine(Words(p))
			}
			return lines
		}
	}
	return []string{oneLine(Words(err))}
}

// Words is err's message without the system calls that failed, which
// mean nothing to the person reading it: a *fs.PathError's
// "lstat /a/b: permission denied" reads "/a/b: permission denied", a
// *net.OpError's "dial unix /s: connect: connection refused" reads
// "/s: connection refused", and a path said twice in a row is said once.
func Words(err error) string {
	msg := err.Error()
	var walk func(error)
	walk = func(e error) {
		switch e := e.(type) {
		case nil:
			return
		case *fs.PathError:
			msg = strings.ReplaceAll(msg, e.Error(), e.Path+": "+e.Err.Error())
			msg = strings.ReplaceAll(msg, e.Path+": "+e.Path+": ", e.Path+": ")
		case *net.OpError:
			if e.Addr != nil {
				inner := e.Err.Error()
				var se *os.SyscallError
				if errors.As(e.Err, &se) {
					inner = se.Err.Error()
				}
				a := e.Addr.String()
				msg = strings.ReplaceAll(msg, e.Error(), a+": "+inner)
				msg = strings.ReplaceAll(msg, a+": "+a+": ", a+": ")
			}
		case *os.SyscallError:
			msg = strings.ReplaceAll(msg, e.Error(), e.Err.Error())
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return msg
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Warn writes a warning: something the user should fix, though the
// command went on. It has the shape of Report's error lines.
func Warn(w io.Writer, prog, msg, hint string) {
	fmt.Fprintf(w, "%s: warning: %s\n", prog, oneLine(msg))
	if hint != "" {
		fmt.Fprintf(w, "hint: %s\n", oneLine(hint))
	}
}

// Count is n with the noun that agrees with it: "1 problem", "2
// problems".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
