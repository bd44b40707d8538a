package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sharedos/sharedos-mcp/internal/testfs"
)

func sha(line string) string {
	sum := sha256.Sum256([]byte(line))
	return hex.EncodeToString(sum[:])
}

func verifyFile(t *testing.T, path string, kept ...string) (Verification, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Verify(f, kept...)
}

// chainedLog writes n events to a new log and returns its path and lines.
func chainedLog(t *testing.T, n int) (string, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	writeEvents(t, a, 0, n)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return path, logLines(t, path)
}

func TestEachLineChainsToTheOneBefore(t *testing.T) {
	path, lines := chainedLog(t, 5)
	for i, l := range lines {
		want := Genesis
		if i > 0 {
			want = sha(lines[i-1])
		}
		if got := fields(t, l)["prev"]; got != want {
			t.Errorf("line %d: prev %v, want %s", i+1, got, want)
		}
	}
	v, err := verifyFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	want := Verification{Lines: 5, Events: 5, Head: sha(lines[4]), HeadLine: 5}
	if v != want {
		t.Errorf("Verify = %+v, want %+v", v, want)
	}
	// A restarted kernel goes on with the same chain.
	a := openLog(t, path)
	writeEvents(t, a, 5, 6)
	a.Close()
	if lines := logLines(t, path); fields(t, lines[5])["prev"] != sha(lines[4]) {
		t.Errorf("after a restart the chain starts again: %s", lines[5])
	}
	if _, err := verifyFile(t, path); err != nil {
		t.Error(err)
	}
}

// TestVerifyNamesTheFirstBrokenLine: every kind of edit someone without
// the head could make is caught, at the line it touches.
func TestVerifyNamesTheFirstBrokenLine(t *testing.T) {
	_, lines := chainedLog(t, 6)
	forged := strings.Replace(lines[2], `"status":"succeeded"`, `"status":"denied"`, 1)
	tests := []struct {
		name   string
		edit   func([]string) []string
		line   int
		reason string
	}{
		{"an edited event", func(l []string) []string { l[2] = forged; return l }, 4, "prev does not match line 3"},
		{"a removed event", func(l []string) []string { return append(l[:2:2], l[3:]...) }, 3, "prev does not match line 2"},
		{"an inserted event", func(l []string) []string { return append(l[:3:3], append([]string{l[1]}, l[3:]...)...) }, 4, "prev does not match line 3"},
		{"two events swapped", func(l []string) []string { l[2], l[3] = l[3], l[2]; return l }, 3, "prev does not match line 2"},
		{"the first lines removed", func(l []string) []string { return l[2:] }, 1, "genesis"},
		{"a carriage return an editor added", func(l []string) []string { l[1] += "\r"; return l }, 3, "prev does not match line 2"},
		{"a line of garbage", func(l []string) []string { l[3] = "garbage"; return l }, 4, "not an audit event"},
		{"an event without prev after chained ones", func(l []string) []string {
			l[4] = strings.Replace(l[4], `"prev":"`+sha(l[3])+`"`, `"x":"y"`, 1)
			return l
		}, 5, "no prev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := tt.edit(append([]string(nil), lines...))
			_, err := Verify(strings.NewReader(strings.Join(edited, "\n") + "\n"))
			var b *ChainBreak
			if !errors.As(err, &b) || !errors.Is(err, ErrChainBroken) {
				t.Fatalf("Verify = %v, want a chain break", err)
			}
			if b.Line != tt.line || !strings.Contains(b.Reason, tt.reason) {
				t.Errorf("break at line %d (%s), want line %d (%s)", b.Line, b.Reason, tt.line, tt.reason)
			}
		})
	}
}

// TestAKeptHeadCatchesARewrite: whoever runs as the kernel's uid can cut
// the end off the log, or rewrite it with a fresh, whole chain; only a
// head kept elsewhere shows it.
func TestAKeptHeadCatchesARewrite(t *testing.T) {
	path, lines := chainedLog(t, 6)
	v, err := verifyFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	kept := v.Head
	// Later events do not move the kept head out of the chain.
	a := openLog(t, path)
	writeEvents(t, a, 6, 8)
	a.Close()
	if _, err := verifyFile(t, path, kept); err != nil {
		t.Errorf("a grown log fails against a head kept earlier: %v", err)
	}
	cut := strings.Join(lines[:4], "\n") + "\n"
	if _, err := Verify(strings.NewReader(cut)); err != nil {
		t.Fatalf("a log cut short is a whole chain on its own: %v", err)
	}
	if _, err := Verify(strings.NewReader(cut), kept); !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), kept) {
		t.Errorf("a log cut before the kept head: %v, want a break naming it", err)
	}
	// Rewritten from the start through the kernel's own writer: a whole
	// chain, with one event changed.
	rewritten := filepath.Join(t.TempDir(), "audit.jsonl")
	b := openLog(t, rewritten)
	for i := range 8 {
		ev := testEvent(i)
		if i == 2 {
			ev.Status = "denied"
		}
		if err := b.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	if _, err := verifyFile(t, rewritten); err != nil {
		t.Fatalf("the rewrite is a whole chain: %v", err)
	}
	if _, err := verifyFile(t, rewritten, kept); !errors.Is(err, ErrChainBroken) {
		t.Errorf("a rewritten log passes against the kept head: %v", err)
	}
}

// TestTheChainHoldsAcrossRepairs: a torn tail set aside at open, and a
// second crash during that repair, keep a chain Verify accepts, and
// the fragments stay covered.
func TestTheChainHoldsAcrossRepairs(t *testing.T) {
	path, lines := chainedLog(t, 2)
	appendRaw(t, path, `{"time":"2026-04-01T`)
	v, err := verifyFile(t, path)
	if err != nil || v.TornTail != 20 || v.Head != sha(lines[1]) {
		t.Fatalf("before the repair: %+v, %v; want a 20-byte torn tail after a whole chain", v, err)
	}
	var logged bytes.Buffer
	a, err := Open(path, WithLogger(zerolog.New(&logged)))
	if err != nil {
		t.Fatal(err)
	}
	writeEvents(t, a, 2, 3)
	a.Close()
	if !strings.Contains(logged.String(), "set them aside") {
		t.Errorf("the repair was not logged: %s", logged.String())
	}
	// A crash in the middle of the next repair's segment.
	appendRaw(t, path, `{"time":"2026-04-02T00:00:00Z","event":"tool.inv`)
	appendRaw(t, path, "\n"+`{"time":"2026-04-02T00:00:01Z","event":"audit.seg`)
	a = openLog(t, path)
	writeEvents(t, a, 3, 4)
	a.Close()

	got := logLines(t, path)
	v, err = verifyFile(t, path)
	if err != nil {
		t.Fatalf("Verify: %v\n%s", err, strings.Join(got, "\n"))
	}
	if v.SetAside != 3 || v.Segments != 2 || v.Events != len(got)-3 || v.TornTail != 0 {
		t.Errorf("Verify = %+v, want 3 lines set aside by 2 segments", v)
	}
	second := fields(t, got[len(got)-2])
	if second["tornLines"] != 2.0 || second["continues"] != sha(got[len(got)-5]) {
		t.Errorf("second segment %v: want 2 torn lines continuing from the event before them", second)
	}
	// The event a segment vouches for cannot be edited unnoticed, though
	// no line's prev covers it.
	edited := append([]string(nil), got...)
	edited[1] = strings.Replace(edited[1], "succeeded", "denied", 1)
	if _, err := Verify(strings.NewReader(strings.Join(edited, "\n") + "\n")); !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), "continues from") {
		t.Errorf("editing the event before a torn line: %v", err)
	}
	// A segment must count what it sets aside.
	edited = append([]string(nil), got...)
	edited[2] = "x" + edited[2]
	if _, err := Verify(strings.NewReader(strings.Join(edited, "\n") + "\n")); !errors.Is(err, ErrChainBroken) {
		t.Errorf("a set-aside line grew and the chain holds: %v", err)
	}
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestARotatedLogContinuesTheChain: the file that replaces a renamed log
// starts with a segment naming the old file's head.
func TestARotatedLogContinuesTheChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var logged bytes.Buffer
	a, err := Open(path, WithLogger(zerolog.New(&logged)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	writeEvents(t, a, 0, 3)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, a, 3, 5)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	old, err := verifyFile(t, path+".1")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := verifyFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Continues != old.Head || cur.Segments != 1 || cur.Events != 3 {
		t.Errorf("new file %+v, want it to continue from the old head %s", cur, old.Head)
	}
	if !strings.Contains(logged.String(), "renamed or removed") {
		t.Errorf("the rotation was not logged: %s", logged.String())
	}
}

// TestALogBegunBeforeTheChain: lines of an older kernel stay readable and
// are reported as not covered; the chain starts after them.
func TestALogBegunBeforeTheChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	legacy := `{"time":"2026-01-01T00:00:00Z","event":"turn.opened","executionId":"exe_1","integration":"cc","peer":{"uid":1,"pid":1}}`
	testfs.WriteFile(t, path, legacy+"\n"+legacy+"\n", 0o600)
	a := openLog(t, path)
	writeEvents(t, a, 0, 2)
	a.Close()
	v, err := verifyFile(t, path)
	if err != nil || v.Unchained != 2 || v.Events != 4 {
		t.Errorf("Verify = %+v, %v; want 2 unchained events then a chain", v, err)
	}
	lines := logLines(t, path)
	if fields(t, lines[2])["prev"] != sha(legacy) {
		t.Error("the chain does not start from the last line before it")
	}
}

// TestTheLongestLineFitsTheReaders: the writer's worst case (every string
// field at its bound, every byte a control character) is under the line
// limit audit and audit verify read with, with room to spare.
func TestTheLongestLineFitsTheReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	ev := testEvent(0)
	v := reflect.ValueOf(&ev).Elem()
	fill := func(s string) {
		for i := range v.NumField() {
			switch f := v.Field(i); {
			case f.Kind() == reflect.String:
				f.SetString(strings.Repeat(s, maxAuditField))
			case f.Type() == reflect.TypeFor[[]string]():
				f.Set(reflect.ValueOf(slices.Repeat([]string{strings.Repeat(s, maxListItem)}, maxListItems)))
			}
		}
		ev.Arguments = json.RawMessage(`"` + strings.Repeat("\u2028", MaxArguments/len("\u2028")-1) + `"`)
	}
	fill("\u202e")
	ev2 := ev
	fill("\x01")
	if err := errors.Join(a.Write(ev), a.Write(ev2), a.Close()); err != nil {
		t.Fatal(err)
	}
	for _, l := range logLines(t, path) {
		t.Logf("%d bytes", len(l))
		if len(l) > maxAuditLine/2 {
			t.Errorf("a %d-byte line; the readers take %d", len(l), maxAuditLine)
		}
	}
	if _, err := verifyFile(t, path); err != nil {
		t.Error(err)
	}
}

// TestASecondWriterIsRefused: two kernels on one log would interleave two
// chains; the second cannot open it until the first closes it.
func TestASecondWriterIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	if _, err := Open(path); !errors.Is(err, ErrBusy) {
		t.Errorf("second Open: %v, want ErrBusy", err)
	}
	a.Close()
	b := openLog(t, path)
	b.Close()
}

// TestWriteAfterCloseFails: Close is final, unlike a failed write (see
// TestAFullDiskLeavesTheLogWhole).
func TestWriteAfterCloseFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := openLog(t, path)
	a.Close()
	if err := a.Write(testEvent(0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := a.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
}
