package jsonlex

import (
	"bytes"
	"cmp"
	"slices"
	"unicode/utf8"
)

// LongString is the shortest string body, in bytes, a Prescan records.
// Shorter strings are read again by the lexer: they cost it little, and
// recording each of a catalogue's thousands of descriptions would cost
// more than it saves.
const LongString = 4 << 10

// A Prescan reads a text ahead of its lexer, while the text is still
// arriving, and records where each long string ends and that its body is
// valid; a Lexer given it (Lexer.Known) steps over such a string at once
// instead of reading it again. A megabyte message arrives in pieces, as
// fast as its writer writes them: checking its strings between the
// pieces uses time the reader would spend waiting for the next one, and
// leaves the lexer almost nothing to do once the message is whole.
//
// It follows strings as a lexer does in a valid text: outside a string a
// '"' opens one; inside, '\\' starts an escape and '"' closes it. It
// checks a body exactly as Lexer.str does, under the same UTF8 option.
// In a text that is not valid its idea of where strings are may be
// wrong, which is harmless: the lexer uses a record only for a string it
// reads from that same opening quote, and what a record says depends on
// the bytes from that quote on, not on what came before it.
type Prescan struct {
	stop    Stop
	pos     int  // the next byte to look at
	open    int  // the opening quote of the string pos is in, or -1
	escaped bool // that string holds an escape
	done    bool // a string is invalid: the lexer will stop there
	spans   []span
}

// span is a recorded string: start is its opening quote's offset, end
// its closing quote's.
type span struct {
	start, end int
	escaped    bool
}

// Reset starts p on a new text, to be read with the options o.
func (p *Prescan) Reset(o Options) {
	p.stop = stopFor(o.UTF8)
	p.pos, p.open, p.escaped, p.done = 0, -1, false, false
	p.spans = p.spans[:0]
}

// Scan reads on in text, all of the text that has arrived so far, from
// where the last Scan stopped. It stops before an escape or a UTF-8
// sequence that the text does not yet hold whole.
func (p *Prescan) Scan(text []byte) {
	if p.done {
		return
	}
	// Locals, not fields, in the loop: it runs once per escape, every
	// dozen bytes of text like source code.
	i, open, escaped, stop := p.pos, p.open, p.escaped, p.stop
	defer func() { p.pos, p.open, p.escaped = i, open, escaped }()
	for i < len(text) {
		if open < 0 {
			k := bytes.IndexByte(text[i:], '"')
			if k < 0 {
				i = len(text)
				return
			}
			open, escaped = i+k, false
			i += k + 1
			continue
		}
		if i = SkipPlain(text, i, stop); i >= len(text) {
			return
		}
		b := text[i]
		if b == '"' {
			if i-open-1 >= LongString {
				p.spans = append(p.spans, span{open, i, escaped})
			}
			open = -1
			i++
			continue
		}
		if b == '\\' {
			// The escapes Lexer.str takes, checked as there; the
			// \u case is written out in both, since a function they
			// shared would not be inlined and would slow the lexer.
			// FuzzPrescan holds the two to each other.
			if i+1 >= len(text) {
				return // the rest of the escape has not arrived
			}
			if shortEscape[text[i+1]] {
				i = skipShortEscapes(text, i+2, stop)
				escaped = true
				continue
			}
			if text[i+1] == 'u' {
				if i+6 > len(text) {
					if allHex(text[i+2:]) {
						return
					}
				} else if allHex(text[i+2 : i+6]) {
					i += 6
					escaped = true
					continue
				}
			}
		} else if b >= utf8.RuneSelf { // only under RequireUTF8
			if !utf8.FullRune(text[i:]) {
				return
			}
			if r, size := utf8.DecodeRune(text[i:]); r != utf8.RuneError || size > 1 {
				i += size
				continue
			}
		}
		// A control character, a bad escape or bad UTF-8: the lexer
		// stops at this string, and no record is of use past it.
		p.done = true
		return
	}
}

// allHex reports whether every byte of b is a hex digit.
func allHex(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

// StringEnd returns the offset of the closing quote of the string whose
// opening quote is at start, if p recorded that string.
func (p *Prescan) StringEnd(start int) (int, bool) {
	if len(p.spans) == 0 {
		return 0, false
	}
	i, ok := slices.BinarySearchFunc(p.spans, start, func(s span, start int) int { return cmp.Compare(s.start, start) })
	if !ok {
		return 0, false
	}
	return p.spans[i].end, true
}

// Known gives l what p found in the text that l's source is part of:
// the source begins at offset off of the text p scanned. p must not be
// reset or scanned further while l reads. Records made under other
// options than l's are not used.
func (l *Lexer) Known(p *Prescan, off int) {
	l.known, l.knownOff = nil, 0
	if p != nil && p.stop == l.stop {
		l.known, l.knownOff = p.spans, off
	}
}

// knownString returns where str reads on from in the string whose
// opening quote is at start: the closing quote when the prescan recorded
// that string, with whether it holds escapes; otherwise next.
func (l *Lexer) knownString(start, next int) (int, bool) {
	at := start + l.knownOff
	k := l.known
	for len(k) > 0 && k[0].start < at {
		k = k[1:]
	}
	l.known = k
	if len(k) == 0 || k[0].start != at {
		return next, false
	}
	l.known = k[1:]
	end := k[0].end - l.knownOff
	if end >= len(l.src) || l.src[end] != '"' {
		return next, false
	}
	return end, k[0].escaped
}
