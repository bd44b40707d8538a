package jsonrpc

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderSplitsLines(t *testing.T) {
	tests := []struct {
		name  string
		input string
		max   int
		want  []string // "!" marks ErrLineTooLong
	}{
		{"plain lines", "a\nbb\n", 10, []string{"a", "bb"}},
		{"crlf endings are accepted", "a\r\nbb\r\n", 10, []string{"a", "bb"}},
		{"last line without newline", "a\nbb", 10, []string{"a", "bb"}},
		{"blank lines are lines", "\n\na\n", 10, []string{"", "", "a"}},
		{"line at the limit", "12345\n", 5, []string{"12345"}},
		{"line at the limit with crlf", "12345\r\n", 5, []string{"12345"}},
		{"over-long line is skipped", "123456\nok\n", 5, []string{"!", "ok"}},
		{"over-long final line without newline", "ok\n123456", 5, []string{"ok", "!"}},
		{"over-long line bigger than the buffer", strings.Repeat("x", 200<<10) + "\nok\n", 1000, []string{"!", "ok"}},
		{"long line within the limit bigger than the buffer", strings.Repeat("y", 200<<10) + "\n", 300 << 10, []string{strings.Repeat("y", 200<<10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.input), tt.max)
			var got []string
			for {
				line, err := r.ReadLine()
				if err == io.EOF {
					break
				}
				if errors.Is(err, ErrLineTooLong) {
					got = append(got, "!")
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\"}\r\n\n{}\n"), 8)
	f.Add([]byte("xxxxxxxxxxxx\nyy"), 4)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		r := NewReader(strings.NewReader(string(data)), max)
		total := 0
		for i := 0; ; i++ {
			line, err := r.ReadLine()
			if err == io.EOF {
				break
			}
			if i > len(data)+1 {
				t.Fatalf("more lines than bytes")
			}
			if errors.Is(err, ErrLineTooLong) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(line) > max {
				t.Fatalf("line of %d bytes over max %d", len(line), max)
			}
			if strings.ContainsRune(string(line), '\n') {
				t.Fatalf("line contains a newline")
			}
			total += len(line)
		}
		if total > len(data) {
			t.Fatalf("returned more bytes than read")
		}
	})
}

func TestReadOwnedLineKeepsEachLine(t *testing.T) {
	// Long lines are assembled outside the read buffer, short ones sit in
	// it: both must survive the reads that follow.
	want := []string{strings.Repeat("a", 200<<10), "b", strings.Repeat("c", 300<<10), "d", strings.Repeat("e", 100<<10)}
	r := NewReader(strings.NewReader(strings.Join(want, "\n")+"\n"), 0)
	var kept [][]byte
	for range want {
		line, err := r.ReadOwnedLine()
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, line)
	}
	if _, err := r.ReadOwnedLine(); err != io.EOF {
		t.Fatalf("after the last line: %v, want io.EOF", err)
	}
	for i, line := range kept {
		if string(line) != want[i] {
			t.Errorf("line %d changed after later reads: %.20q… (%d bytes), want %.20q… (%d bytes)", i, line, len(line), want[i], len(want[i]))
		}
	}
}
