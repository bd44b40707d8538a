package upstream

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestBoundedLinesPassLinesWithinTheBoundAndAnswerForLongerOnes(t *testing.T) {
	limit := lineEnvelope + 100
	long := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 3*limit) + `"}]}}` + "\n"
	fits := `{"jsonrpc":"2.0","id":8,"result":{"t":"` + strings.Repeat("y", limit-60) + `"}}` + "\n"
	in := `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n" + long + fits + `{"jsonrpc":"2.0","id":"s","result":{}}` + "\n" + `{"jsonrpc":"2.0","id":9,"result":{}}`
	for name, r := range map[string]io.Reader{
		"whole":          strings.NewReader(in),
		"a byte at once": iotest.OneByteReader(strings.NewReader(in)),
		"half reads":     iotest.HalfReader(strings.NewReader(in)),
	} {
		t.Run(name, func(t *testing.T) {
			b := &boundedLines{r: r, limit: limit}
			out, err := io.ReadAll(b)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitAfter(string(out), "\n")
			if len(lines) != 5 {
				t.Fatalf("%d lines out: %.300q", len(lines), out)
			}
			if !strings.HasPrefix(lines[0], `{"jsonrpc":"2.0","method"`) || lines[2] != fits || lines[4] != `{"jsonrpc":"2.0","id":9,"result":{}}` {
				t.Errorf("lines within the bound changed: %.200q", lines)
			}
			if !strings.HasPrefix(lines[1], `{"jsonrpc":"2.0","id":7,"error":{"code":-32099,"message":"the answer is `+strconv.Itoa(len(long))+` bytes`) {
				t.Errorf("in place of the long line: %q", lines[1])
			}
			if cap(b.line) > 4*chunkSize+limit || cap(b.out) > 4*chunkSize+limit {
				t.Errorf("buffers of %d and %d bytes kept", cap(b.line), cap(b.out))
			}
		})
	}
}

func TestBoundedLinesEndOnALongLineTheyCannotAnswerFor(t *testing.T) {
	limit := lineEnvelope + 100
	body := strings.Repeat("x", 3*limit)
	for name, line := range map[string]string{
		"no id":             `{"jsonrpc":"2.0","result":{"t":"` + body + `"}}`,
		"the id at the end": `{"jsonrpc":"2.0","result":{"t":"` + body + `"},"id":3}`,
		"a request":         `{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"t":"` + body + `"}}`,
		"a null id":         `{"jsonrpc":"2.0","id":null,"error":{"message":"` + body + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := io.ReadAll(&boundedLines{r: strings.NewReader(line + "\n"), limit: limit})
			if !errors.Is(err, errLineTooLong) {
				t.Errorf("err = %v, want errLineTooLong", err)
			}
		})
	}
}
