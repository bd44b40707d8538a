package upstream

import (
	"bufio"
	"io"
	"strings"
)

func bufioReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 16) }

func readAll(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
