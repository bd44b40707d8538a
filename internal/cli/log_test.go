package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHumanLogIsOneLinePerRecord: a record is a line in the command's
// own shape, and what an upstream wrote (a terminal escape, a newline)
// is quoted, never passed to the terminal.
func TestHumanLogIsOneLinePerRecord(t *testing.T) {
	var out bytes.Buffer
	lg, err := NewLog("prog", LogOptions{}, &out)
	if err != nil {
		t.Fatal(err)
	}
	lg.Info().Str("upstream", "memory").Int("pid", 42).Msg("upstream ready")
	lg.Warn().Err(errors.New("too many open files")).Dur("retry_in_ms", 5e6).Msg("accept failed")
	lg.Info().Str("line", "\x1b[31mred\nnext").Msg("upstream stderr")
	lg.Debug().Msg("not at info")
	fmt.Fprintf(lg.Report, "prog: kernel listening on /s\n")
	want := "prog: upstream ready (pid=42 upstream=memory)\n" +
		"prog: warning: accept failed: too many open files (retry_in_ms=5)\n" +
		"prog: upstream stderr (line=\"\\x1b[31mred\\nnext\")\n" +
		"prog: kernel listening on /s\n"
	if out.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestJSONLogMakesEveryLineARecord: with --log-format json what the
// command reports is records too, at the level its words say, and a
// command that fails ends with a record of why, nothing else.
func TestJSONLogMakesEveryLineARecord(t *testing.T) {
	var out bytes.Buffer
	lg, err := NewLog("prog", LogOptions{Format: "json", Level: "error"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(lg.Report, "prog: kernel listening on /s\nprog: warning: grant #1 expired\nhint: 'prog kernel check' lists it\n  TOOL  ACTION\n")
	lg.Info().Msg("below the level")
	err = lg.Finish(Hintf(errors.New("cannot bind"), "pick another --socket"))
	if code := Report(&out, "prog", err); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var r map[string]string
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("a line that is not a record: %q", line)
		}
		got = append(got, r["level"]+" "+r["message"]+" "+r["hint"])
	}
	want := []string{"info kernel listening on /s ", "warn grant #1 expired ", "warn hint: 'prog kernel check' lists it ", "info   TOOL  ACTION ", "error cannot bind pick another --socket"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("records:\n%q\nwant:\n%q", got, want)
	}
}

// TestLogFileHasEverythingAndStderrTheError: in a --log-file the records
// are JSON and the command's end is one of them; stderr has only the
// error that stopped it.
func TestLogFileHasEverythingAndStderrTheError(t *testing.T) {
	var stderr bytes.Buffer
	path := filepath.Join(t.TempDir(), "new", "k.log")
	lg, err := NewLog("prog", LogOptions{File: path}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(lg.Report, "prog: config k.toml")
	err = lg.Finish(errors.New("audit log busy"))
	Report(&stderr, "prog", err)
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	if stderr.String() != "prog: error: audit log busy\n" {
		t.Errorf("stderr = %q, want the error alone", stderr.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"message":"config k.toml"`) || !strings.Contains(string(data), `"level":"error","time":`) {
		t.Errorf("log file:\n%s", data)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("log directory: %v, %v; want it made 0700", fi, err)
	}
}
