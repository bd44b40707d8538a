package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// What an exported audit line carries (kernel/telemetry writes it; the
// collector's file exporter stores it as OTLP/JSON): the line, byte for
// byte, as the log record's body; its hash and, on an event, its prev as
// attributes; and, on the resource, which log it is.
const (
	AttrHash = "sharedos.audit.hash" // SHA-256 (hex) of the line: the next line's prev
	AttrPrev = "prev"                // the event's own prev field
	// AttrLog names the log on the resource: the absolute path of the
	// file, with host.name beside it.
	AttrLog  = "sharedos.audit.log"
	AttrHost = "host.name"
)

// LogID names one audit log among the many a collector may hold (a team's
// kernels, or one kernel's logs at several paths).
type LogID struct {
	Host string // host.name
	Path string // the log's absolute path
}

func (id LogID) String() string { return id.Host + ":" + id.Path }

// Against is what VerifyAgainst found.
type Against struct {
	Lines    int // lines of the local log
	Exported int // of them, how many the copy holds
	// NotYet counts the local log's last lines that the copy does not
	// hold yet: written after the last export that reached it.
	NotYet int
	// Records counts the copy's records of this log, each once however
	// often it was delivered (the export is at least once), and
	// Duplicates the deliveries beyond the first.
	Records, Duplicates int
	// Others lists the logs the copy holds records of besides this one.
	Others []LogID
}

// ErrNoExport: the exported copy holds no record of the log.
var ErrNoExport = errors.New("the exported copy holds no line of this log")

// ExportError is an exported copy that cannot be read as one, or a record
// in it whose body does not hash to the hash it carries.
type ExportError struct {
	Line   int // line of the exported file
	Reason string
}

func (e *ExportError) Error() string {
	return fmt.Sprintf("exported copy, line %d: %s", e.Line, e.Reason)
}

// VerifyAgainst checks the local audit log against an exported copy of
// its stream: the JSON lines an OpenTelemetry Collector's file exporter
// wrote of the log records kernel/telemetry sent (docs/telemetry.md). It
// checks the lines of id's log only.
//
// The copy is out of the local uid's reach, so it is the reference:
// every event it holds of this log must be a line of the local log, or
// of the files that log continues (a rotation's segment names the last
// line of the file before, and that file's lines chain back from it). The
// first record that is neither names the first divergence: the local
// line after the one it continues (its prev), so an edit or a rewrite
// from line N, lines cut from the end, and a log replaced from its first
// line are each named by the line where the local log stops holding what
// was exported. The local log's last lines may be missing from the copy
// (NotYet): they were written after the last export that reached it.
//
// It returns a *ChainBreak (wrapping ErrChainBroken) for a divergence,
// ErrNoExport when the copy holds no line of the log, an *ExportError for
// a copy that is not one, and other errors only for reading. Check the
// local chain with Verify first: VerifyAgainst compares hashes, it does
// not check that the local lines chain.
func VerifyAgainst(local, exported io.Reader, id LogID) (Against, error) {
	var a Against
	recs, others, dups, err := readExport(exported, id)
	if err != nil {
		return a, err
	}
	a.Records, a.Duplicates, a.Others = len(recs), dups, others
	lr := newAuditLineReader(local)
	var hashes []string
	lineOf := map[string]int{}
	var first Event
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return a, fmt.Errorf("read audit log: %w", err)
		}
		var h string
		if l.long {
			h = "long" // no line the kernel writes; no export holds it
		} else {
			h = LineHash(l.bytes)
			if len(hashes) == 0 {
				_ = json.Unmarshal(l.bytes, &first)
			}
		}
		hashes = append(hashes, h)
		lineOf[h] = len(hashes)
	}
	a.Lines = len(hashes)
	byHash := make(map[string]*exportRecord, len(recs))
	for i := range recs {
		byHash[recs[i].hash] = &recs[i]
	}
	last := 0 // the last local line the copy holds
	for i, h := range hashes {
		if byHash[h] != nil {
			a.Exported++
			last = i + 1
		}
	}
	a.NotYet = a.Lines - last
	if len(recs) == 0 {
		return a, ErrNoExport
	}

	// Lines of the files this one continues: back from the rotation's
	// continues, through each line's prev (a set-aside stretch through its
	// segment's continues), to the first line of that file, which may
	// continue another.
	ancestors := map[string]bool{}
	if first.Event == EventSegment && first.Reason == SegmentRotated {
		for h := first.Continues; h != "" && h != Genesis && !ancestors[h]; {
			r := byHash[h]
			if r == nil {
				break
			}
			ancestors[h] = true
			switch {
			case r.event == EventSegment && r.reason == SegmentTornTail:
				h = r.continues
			case r.prev == Genesis && r.event == EventSegment && r.reason == SegmentRotated:
				h = r.continues
			default:
				h = r.prev
			}
		}
	}

	// Lines of the files that continue this one: a rotation's segment
	// that names this file's last line, and what chains from it. The copy
	// holds them in the order they were written, so one pass finds them.
	descendants := map[string]bool{}
	if a.Lines > 0 {
		for i := range recs {
			r := &recs[i]
			switch {
			case r.prev == Genesis && r.event == EventSegment && r.reason == SegmentRotated && (r.continues == hashes[a.Lines-1] || descendants[r.continues]):
				descendants[r.hash] = true
			case r.prev != "" && r.prev != Genesis && descendants[r.prev]:
				descendants[r.hash] = true
			}
		}
	}

	// The first divergence: for each exported event not here, not before
	// and not after, the local line it says follows its prev.
	var brk *ChainBreak
	for i := range recs {
		r := &recs[i]
		if r.prev == "" || lineOf[r.hash] > 0 || ancestors[r.hash] || descendants[r.hash] {
			continue // not an event (a set-aside line), or accounted for
		}
		b := divergence(r, byHash, lineOf, ancestors, len(hashes))
		if brk == nil || b.Line < brk.Line {
			brk = b
		}
	}
	if brk != nil {
		return a, brk
	}
	if a.Exported == 0 && len(ancestors) == 0 {
		return a, ErrNoExport
	}
	return a, nil
}

// divergence says where the local log stops holding what the copy holds,
// for r, an exported event it does not hold: after the line r's prev
// names; or, when that line is not here either, where the exported events
// before r (back through their prev) first left the local log.
func divergence(r *exportRecord, byHash map[string]*exportRecord, lineOf map[string]int, ancestors map[string]bool, n int) *ChainBreak {
	seen := map[string]bool{}
	for !seen[r.hash] {
		seen[r.hash] = true
		if r.prev == Genesis {
			return &ChainBreak{1, fmt.Sprintf("the exported copy holds a log of this path that began with another line (%s): the local log was replaced from its first line, or started again by hand", r.describe())}
		}
		if k := lineOf[r.prev]; k > 0 {
			if k == n {
				return &ChainBreak{k + 1, fmt.Sprintf("the exported copy holds a line after the local log's last, line %d (%s): lines were cut from its end", k, r.describe())}
			}
			return &ChainBreak{k + 1, fmt.Sprintf("the exported copy has another line after line %d (%s): the local line %d is not the one that was exported", k, r.describe(), k+1)}
		}
		p := byHash[r.prev]
		if p == nil || ancestors[r.prev] {
			break
		}
		r = p
	}
	return &ChainBreak{n + 1, fmt.Sprintf("the exported copy holds lines of this log that continue none of the local log's (%s)", r.describe())}
}

// exportRecord is one exported audit line, as VerifyAgainst needs it.
type exportRecord struct {
	hash, prev string // prev is "" for a line that is not an event
	event      string
	time       string
	reason     string
	continues  string
	line       int // line of the exported file that holds it
}

func (r *exportRecord) describe() string {
	return fmt.Sprintf("%s at %s, exported line %d, hash %s", r.event, r.time, r.line, r.hash)
}

// The OTLP/JSON an OpenTelemetry Collector's file exporter writes: one
// ExportLogsServiceRequest per line.
type (
	otlpLogs struct {
		ResourceLogs []struct {
			Resource struct {
				Attributes []otlpAttribute `json:"attributes"`
			} `json:"resource"`
			ScopeLogs []struct {
				LogRecords []struct {
					Body       otlpValue       `json:"body"`
					Attributes []otlpAttribute `json:"attributes"`
				} `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
	}
	otlpAttribute struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		StringValue *string `json:"stringValue"`
	}
)

func attr(attrs []otlpAttribute, key string) string {
	for _, a := range attrs {
		if a.Key == key && a.Value.StringValue != nil {
			return *a.Value.StringValue
		}
	}
	return ""
}

// maxExportLine bounds a line of the exported file: one export request,
// which the kernel keeps to far less (kernel/telemetry batches at most
// 1 MiB of lines).
const maxExportLine = 64 << 20

// readExport reads the records of id's log from an exported copy, each
// once, in the order first delivered; it also names the other logs the
// copy holds and counts the deliveries beyond the first.
func readExport(r io.Reader, id LogID) (recs []exportRecord, others []LogID, dups int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
	seen := map[string]bool{}
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var req otlpLogs
		if err := json.Unmarshal(line, &req); err != nil {
			return nil, nil, 0, &ExportError{n, "not OTLP/JSON log records: " + err.Error()}
		}
		for _, rl := range req.ResourceLogs {
			lid := LogID{Host: attr(rl.Resource.Attributes, AttrHost), Path: attr(rl.Resource.Attributes, AttrLog)}
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					h := attr(lr.Attributes, AttrHash)
					if h == "" {
						continue // not an audit line
					}
					if lid != id {
						if !slices.Contains(others, lid) {
							others = append(others, lid)
						}
						continue
					}
					if seen[h] {
						dups++
						continue
					}
					rec := exportRecord{hash: h, prev: attr(lr.Attributes, AttrPrev), line: n}
					if body := lr.Body.StringValue; body != nil {
						if LineHash([]byte(*body)) != h {
							return nil, nil, 0, &ExportError{n, fmt.Sprintf("a record's body does not hash to its %s %s", AttrHash, h)}
						}
						var e Event
						if json.Unmarshal([]byte(*body), &e) == nil {
							rec.event, rec.time, rec.reason, rec.continues = e.Event, e.Time, e.Reason, e.Continues
						}
					}
					seen[h] = true
					recs = append(recs, rec)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("read the exported copy: %w", err)
	}
	return recs, others, dups, nil
}
