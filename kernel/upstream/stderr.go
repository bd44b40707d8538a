package upstream

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// Bounds of what an upstream's stderr may put into the kernel's log: each
// line is cut at stderrLineBytes; a burst of stderrBurst lines passes, then
// stderrPerSecond lines a second, and the lines dropped in between are
// counted in the next line logged. The last stderrKeep lines are kept for
// Status, where a failed upstream's reason is often found.
const (
	stderrLineBytes = 4 << 10
	stderrBurst     = 200
	stderrPerSecond = 20
	stderrKeep      = 8
)

// stderrLog copies an upstream's stderr into the kernel's log, bounded.
type stderrLog struct {
	log zerolog.Logger
	now func() time.Time

	mu   sync.Mutex
	last []string // the most recent lines, oldest first

	tokens  float64
	refill  time.Time
	dropped int
}

func newStderrLog(log zerolog.Logger, now func() time.Time) *stderrLog {
	return &stderrLog{log: log, now: now, tokens: stderrBurst, refill: now()}
}

// copy reads r until it ends, logging each line within the bounds.
func (s *stderrLog) copy(r io.Reader) {
	br := bufio.NewReaderSize(r, stderrLineBytes)
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			s.line(line, cut)
		}
		for cut {
			// Skip the rest of an overlong line.
			_, err = br.ReadSlice('\n')
			cut = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil {
			return
		}
	}
}

func (s *stderrLog) line(b []byte, cut bool) {
	text := strings.TrimRight(string(b), "\r\n")
	if cut {
		// Do not end inside a UTF-8 sequence.
		for i := 1; i < utf8.UTFMax; i++ {
			if r, size := utf8.DecodeLastRuneInString(text); r != utf8.RuneError || size != 1 {
				break
			}
			text = text[:len(text)-1]
		}
		text += "…"
	}
	s.mu.Lock()
	s.last = append(s.last, text)
	if len(s.last) > stderrKeep {
		s.last = s.last[len(s.last)-stderrKeep:]
	}
	now := s.now()
	s.tokens = min(stderrBurst, s.tokens+now.Sub(s.refill).Seconds()*stderrPerSecond)
	s.refill = now
	if s.tokens < 1 {
		s.dropped++
		s.mu.Unlock()
		return
	}
	s.tokens--
	dropped := s.dropped
	s.dropped = 0
	s.mu.Unlock()
	ev := s.log.Info()
	if dropped > 0 {
		ev = ev.Int("droppedBefore", dropped)
	}
	if cut {
		ev = ev.Bool("truncated", true)
	}
	ev.Str("line", text).Msg("upstream stderr")
}

// lastLines returns the most recent lines, oldest first.
func (s *stderrLog) lastLines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.last...)
}
