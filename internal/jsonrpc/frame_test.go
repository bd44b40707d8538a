package jsonrpc

import (
	"errors"
	"io"
	"runtime"
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

// FuzzReader checks ReadLine and ReadOwnedLine against a model of the
// framing, with the input arriving in pieces of every size and buffers
// small enough to grow and compact; an owned line stays as it was read.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\"}\r\n\n{}\n"), 8, 16, uint8(3))
	f.Add([]byte("xxxxxxxxxxxx\nyy"), 4, 16, uint8(1))
	f.Add([]byte(strings.Repeat("z", 100)+"\r\nshort\n"+strings.Repeat("w", 40)), 120, 16, uint8(7))
	f.Add([]byte(`{"id":1,"result":"`+strings.Repeat(`ab\"`, 1100)+`"}`+"\n"+`{"id":2,"result":"`+strings.Repeat("c", 4200)+`\x"}`+"\n"), 8192, 64, uint8(100))
	f.Fuzz(func(t *testing.T, data []byte, limit, size int, piece uint8) {
		if limit <= 0 || limit > 1<<16 || size <= 0 || size > 1<<12 || piece == 0 {
			return
		}
		var want, long []string
		lines := strings.Split(string(data), "\n")
		if strings.HasSuffix(string(data), "\n") || len(data) == 0 {
			lines = lines[:len(lines)-1]
		}
		for _, raw := range lines {
			l := strings.TrimSuffix(raw, "\r")
			if len(l) > limit {
				l = "\n" // no line holds a newline: this marks one too long
				long = append(long, raw)
			}
			want = append(want, l)
		}
		for _, owned := range []bool{false, true} {
			r := NewReaderSize(&pieces{data: data, n: int(piece)}, limit, size)
			var got []string
			var kept [][]byte
			skipped := 0
			for i := 0; ; i++ {
				var line []byte
				var err error
				if owned {
					line, err = r.ReadOwnedLine()
				} else {
					line, err = r.ReadLine()
				}
				if err == io.EOF {
					break
				}
				if i > len(data)+1 {
					t.Fatalf("more lines than bytes")
				}
				switch {
				case errors.Is(err, ErrLineTooLong):
					got = append(got, "\n")
					// Skipped is the line's beginning: at least its first
					// SkippedPrefix bytes, or limit+1, that are not its "\r".
					raw, p := long[skipped], string(r.Skipped())
					skipped++
					if !strings.HasPrefix(raw, p) || len(p) < min(SkippedPrefix, limit+1, len(strings.TrimSuffix(raw, "\r"))) {
						t.Fatalf("Skipped() = %.40q (%d bytes) for a line starting %.40q (%d bytes)", p, len(p), raw, len(raw))
					}
				case err != nil:
					t.Fatal(err)
				default:
					got = append(got, string(line))
					kept = append(kept, line)
				}
			}
			if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
				t.Fatalf("owned=%v: lines %q, want %q", owned, got, want)
			}
			if owned {
				k := 0
				for _, w := range want {
					if w == "\n" {
						continue
					}
					if string(kept[k]) != w {
						t.Fatalf("owned line %d changed to %q, want %q", k, kept[k], w)
					}
					k++
				}
			}
		}
	})
}

// pieces reads data n bytes at a time.
type pieces struct {
	data []byte
	n    int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.data[:min(p.n, len(p.data))])
	p.data = p.data[n:]
	return n, nil
}

func TestReadOwnedLineKeepsEachLine(t *testing.T) {
	// Long lines grow the read buffer, short ones sit in it: the copies
	// of both must survive the reads that follow.
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

// TestALongLineCostsTwiceItsSize holds a long line to what it needs: the
// pieces it is read into and the one slice it is assembled in, which is
// the caller's (Long) and outlives the reads that follow; the buffer
// keeps its size, so the short lines after it cost nothing. A buffer
// grown by doubling allocated about four times the line, and kept twice
// its size until the reader was dropped.
func TestALongLineCostsTwiceItsSize(t *testing.T) {
	const size = 4 << 20
	long := strings.Repeat("x", size)
	for _, buffer := range []int{64 << 10, 1 << 20} {
		r := NewReaderSize(strings.NewReader(long+"\n"+strings.Repeat("short\n", 200)), 0, buffer)
		var line []byte
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		line, err := r.ReadLine()
		runtime.ReadMemStats(&after)
		if err != nil || len(line) != size || !r.Long() {
			t.Fatalf("buffer %d: a %d-byte line: %d bytes, Long %v, %v", buffer, size, len(line), r.Long(), err)
		}
		if got, most := after.TotalAlloc-before.TotalAlloc, uint64(2*size+maxPiece); got > most {
			t.Errorf("buffer %d: a %d-byte line allocated %d bytes, more than %d", buffer, size, got, most)
		}
		if allocs := testing.AllocsPerRun(100, func() {
			if short, err := r.ReadLine(); err != nil || string(short) != "short" || r.Long() {
				t.Fatalf("buffer %d: the line after a long one: %.20q, Long %v, %v", buffer, short, r.Long(), err)
			}
		}); allocs != 0 {
			t.Errorf("buffer %d: a short line after a long one allocates %v times: the buffer was not kept", buffer, allocs)
		}
		if string(line) != long {
			t.Errorf("buffer %d: the long line changed after the reads that followed it", buffer)
		}
	}
}

// TestSkippedKeepsTheStartOfALongLine: a client that refuses an over-long
// answer can still read whose answer it was.
func TestSkippedKeepsTheStartOfALongLine(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":7,"result":"` + strings.Repeat("x", 5000) + `"}`
	for _, size := range []int{64, 1 << 16} { // skipped while streaming, or found whole
		r := NewReaderSize(strings.NewReader(long+"\n{}\n"), 1024, size)
		if _, err := r.ReadLine(); !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("size %d: ReadLine = %v, want ErrLineTooLong", size, err)
		}
		if got := string(r.Skipped()); got != long[:SkippedPrefix] {
			t.Errorf("size %d: Skipped() = %.60q…, want the line's first %d bytes", size, got, SkippedPrefix)
		}
		if line, err := r.ReadLine(); err != nil || string(line) != "{}" {
			t.Errorf("size %d: the next line is %q, %v", size, line, err)
		}
	}
}
