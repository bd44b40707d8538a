package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/rs/zerolog"
)

// LogOptions are the logging flags serve and kernel share.
type LogOptions struct {
	Level  string // zerolog level name; "" means info
	File   string // "" means stderr
	Format string // "human" or "json"; "" means json in a File, human on stderr
	// Filter, when set, wraps the writer the log's records and reported
	// lines go to: the kernel runs them through its secret redactor. It
	// is given whole lines.
	Filter func(io.Writer) io.Writer
}

// Log is what a long-running command writes besides its answers: its log
// records and the lines it reports to a person (that it listens, what it
// allows, a warning), in one format in one place, stderr or --log-file.
// In the human format a record is a line like the rest
// ("sharedos-mcp: warning: accept failed: … (retry_in_ms=5)"); in JSON
// every reported line is a record too.
type Log struct {
	zerolog.Logger
	// Report takes whole lines written for a person: passed on as they
	// are in the human format, one record each in JSON (at the level
	// their "warning:" or "error:" says).
	Report io.Writer

	prog   string
	json   bool
	file   bool
	always zerolog.Logger // the records of Report and Finish, whatever the level
	close  func() error
}

// NewLog opens the log opts ask for: records at opts.Level and above, to
// opts.File (created 0600, in a directory created 0700 when missing) or
// to stderr. Close must be called on exit.
func NewLog(prog string, opts LogOptions, stderr io.Writer) (*Log, error) {
	level := zerolog.InfoLevel
	if opts.Level != "" {
		l, err := zerolog.ParseLevel(opts.Level)
		if err != nil || opts.Level != l.String() {
			return nil, Usagef("use one of trace, debug, info, warn, error, disabled", "unknown log level %q", opts.Level)
		}
		level = l
	}
	lg := &Log{prog: prog, file: opts.File != "", close: func() error { return nil }}
	switch opts.Format {
	case "":
		lg.json = lg.file
	case "json":
		lg.json = true
	case "human":
	default:
		return nil, Usagef("use --log-format human or --log-format json", "unknown log format %q", opts.Format)
	}
	w := stderr
	if lg.file {
		// A log beside the audit log, in a state directory a new user
		// does not have yet, must not stop the kernel from starting.
		if err := os.MkdirAll(filepath.Dir(opts.File), 0o700); err != nil {
			return nil, Hintf(fmt.Errorf("create the log file's directory: %w", err), "pick a --log-file in a directory you can write")
		}
		f, err := os.OpenFile(opts.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, Hintf(fmt.Errorf("open log file: %w", err), "pick a --log-file in a directory you can write")
		}
		w, lg.close = f, f.Close
	}
	if opts.Filter != nil {
		w = opts.Filter(w)
	}
	records := w
	if !lg.json {
		records = &humanWriter{w: w, prog: prog}
	}
	lg.always = zerolog.New(records).With().Timestamp().Logger()
	lg.Logger = lg.always.Level(level)
	lg.Report = w
	if lg.json {
		lg.Report = &reportRecords{log: lg.always, prog: prog}
	}
	return lg, nil
}

// Close closes the log file, if there is one.
func (l *Log) Close() error { return l.close() }

// Finish is how the command ends with err. In JSON on stderr, err is the
// last record, and nothing else reports it: stderr stays JSON. In a log
// file it is recorded too, so the file says why the command stopped, and
// reported on stderr as well, the one line there.
func (l *Log) Finish(err error) error {
	if err == nil || (!l.json && !l.file) {
		return err
	}
	ev := l.always.Error()
	var he *Error
	var ue *UsageError
	switch {
	case errors.As(err, &ue):
		ev = ev.Str("hint", ue.Hint)
	case errors.As(err, &he):
		ev = ev.Str("hint", he.Hint)
	}
	ev.Msg(strings.Join(Problems(err), "; "))
	if l.file {
		return err
	}
	return &reported{err}
}

// reported is an error the command already wrote where its user reads:
// Report gives its exit code and prints nothing.
type reported struct{ err error }

func (r *reported) Error() string { return r.err.Error() }
func (r *reported) Unwrap() error { return r.err }

// humanWriter renders each zerolog record it is given as one line in the
// command line's own shape: "prog: [warning: |error: ]message[: error]"
// and the other fields, sorted, as (key=value ...). A value that a
// terminal could misread (a space, a quote, a control character) is
// quoted: an upstream's stderr lines arrive here.
type humanWriter struct {
	mu   sync.Mutex
	w    io.Writer
	prog string
}

func (h *humanWriter) Write(p []byte) (int, error) {
	var ev map[string]any
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	if err := d.Decode(&ev); err != nil {
		return 0, fmt.Errorf("render a log record: %w", err)
	}
	var b strings.Builder
	b.WriteString(h.prog + ": ")
	switch lvl, _ := ev[zerolog.LevelFieldName].(string); lvl {
	case "warn":
		b.WriteString("warning: ")
	case "error", "fatal", "panic", "debug", "trace":
		b.WriteString(lvl + ": ")
	}
	msg, _ := ev[zerolog.MessageFieldName].(string)
	b.WriteString(text(msg))
	if e, ok := ev[zerolog.ErrorFieldName]; ok {
		s, _ := e.(string)
		b.WriteString(": " + text(s))
	}
	var keys []string
	for k := range ev {
		switch k {
		case zerolog.LevelFieldName, zerolog.MessageFieldName, zerolog.ErrorFieldName, zerolog.TimestampFieldName:
		default:
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + value(ev[k]))
		if i == len(keys)-1 {
			b.WriteByte(')')
		}
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := io.WriteString(h.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// text is s as it is when every rune shows as itself, else quoted.
func text(s string) string {
	for _, r := range s {
		if !unicode.IsGraphic(r) || (unicode.IsSpace(r) && r != ' ') {
			return strconv.Quote(s)
		}
	}
	return s
}

// value is one field's value: a string bare when it is one plain word,
// else quoted; anything else as compact JSON.
func value(v any) string {
	switch v := v.(type) {
	case string:
		if v != "" && !strings.ContainsAny(v, " \"'=()") && text(v) == v {
			return v
		}
		return strconv.Quote(v)
	case json.Number:
		return v.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// reportRecords turns the lines a command writes for a person into
// records: "prog: warning: …" a warning, "prog: error: …" an error, a
// "hint: …" at the level of the line it explains, anything else (a
// table's rows) as it is, at info.
type reportRecords struct {
	mu   sync.Mutex
	log  zerolog.Logger
	prog string
	buf  []byte
	last zerolog.Level
}

func (r *reportRecords) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		r.record(strings.TrimRight(string(r.buf[:i]), " "))
		r.buf = r.buf[i+1:]
	}
}

func (r *reportRecords) record(line string) {
	level := zerolog.InfoLevel
	if rest, ok := strings.CutPrefix(line, "hint: "); ok {
		level, line = r.last, "hint: "+rest
	} else if rest, ok := strings.CutPrefix(line, r.prog+": "); ok {
		line = rest
		if rest, ok := strings.CutPrefix(line, "warning: "); ok {
			level, line = zerolog.WarnLevel, rest
		} else if rest, ok := strings.CutPrefix(line, "error: "); ok {
			level, line = zerolog.ErrorLevel, rest
		}
	}
	r.last = level
	r.log.WithLevel(level).Msg(line)
}
