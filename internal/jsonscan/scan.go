// Package jsonscan reads a JSON text in place: a validating scanner with
// no reflection and no allocation but the strings it decodes. Adapters use
// it for the one or two line shapes that make up the bulk of a run (a
// streamed text chunk, a completed message), where decoding with
// reflection was most of a run's CPU.
//
// It is a fast path, never the only one: every method reports false for
// anything it does not handle exactly as encoding/json would (an escaped
// member name, a string that is not valid UTF-8, a lone surrogate, nesting
// deeper than 1000), as well as for invalid JSON, and the caller then
// decodes the line the general way. So a caller's walk must give up, not
// guess, whenever a line departs from the shape it knows; [Fields] tells
// it which member names the general decoding would have taken.
package jsonscan

import (
	"iter"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting the scanner follows; deeper input is
// not handled (encoding/json's own limit is 10000).
const maxDepth = 1000

// Scanner reads one JSON value from a byte slice. The zero value is not
// usable: start with [New]. Once a method has reported false the Scanner
// is spent: every later call reports false too.
type Scanner struct {
	data  []byte
	pos   int
	depth int
	bad   bool
	// first is true right after an object's '{': its first member has no
	// comma before it.
	first bool
}

// New returns a Scanner at the start of data.
func New(data []byte) Scanner { return Scanner{data: data} }

// Failed reports whether a method has reported false.
func (s *Scanner) Failed() bool { return s.bad }

// fail spends the Scanner and returns false.
func (s *Scanner) fail() bool {
	s.bad = true
	return false
}

func (s *Scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value ('{', '[', '"', 't', 'f',
// 'n', '-' or a digit for a valid one), 0 at the end or once spent.
func (s *Scanner) peek() byte {
	if s.bad {
		return 0
	}
	s.skipSpace()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// End reports whether nothing but whitespace follows: a whole line read.
func (s *Scanner) End() bool {
	if s.bad {
		return false
	}
	s.skipSpace()
	return s.pos == len(s.data) || s.fail()
}

// object enters the object that is the next value; read its members with
// key. False if the next value is not an object.
func (s *Scanner) object() bool {
	if s.peek() != '{' || s.depth >= maxDepth {
		return s.fail()
	}
	s.pos++
	s.depth++
	s.first = true
	return true
}

// key returns the next member name of the object being read and moves to
// its value, which the caller must then read (or [Scanner.Skip]). At the
// object's end it leaves the object and returns ok false with the Scanner
// not spent; a name with an escape or invalid UTF-8 in it is not handled
// (ok false, spent).
// The name aliases the input.
func (s *Scanner) key() (name []byte, ok bool) {
	if s.bad {
		return nil, false
	}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' && s.first {
		s.pos++
		s.depth--
		s.first = false
		return nil, false
	}
	if !s.first {
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			s.pos++
			s.depth--
			return nil, false
		}
		if s.pos >= len(s.data) || s.data[s.pos] != ',' {
			return nil, s.fail()
		}
		s.pos++
		s.skipSpace()
	}
	s.first = false
	raw, esc, wide, ok := s.scanString()
	if !ok || esc || wide && !utf8.Valid(raw) {
		return nil, s.fail()
	}
	s.skipSpace()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return nil, s.fail()
	}
	s.pos++
	return raw, true
}

// safe marks the bytes a string holds as they are: not a quote, a
// backslash, a control character or part of a multi-byte sequence.
var safe = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString reads the string at pos (after whitespace): raw is its
// contents between the quotes; esc reports escapes in it, wide bytes ≥ 0x80.
// The escapes are checked; UTF-8 is not.
func (s *Scanner) scanString() (raw []byte, esc, wide, ok bool) {
	d := s.data
	if s.pos >= len(d) || d[s.pos] != '"' {
		return nil, false, false, s.fail()
	}
	start := s.pos + 1
	i := start
	for {
		for i < len(d) && safe[d[i]] {
			i++
		}
		if i >= len(d) {
			return nil, false, false, s.fail()
		}
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return d[start:i], esc, wide, true
		case c == '\\':
			esc = true
			if i+1 >= len(d) {
				return nil, false, false, s.fail()
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || hex4(d[i+2:i+6]) < 0 {
					return nil, false, false, s.fail()
				}
				i += 6
			default:
				return nil, false, false, s.fail()
			}
		case c < 0x20:
			return nil, false, false, s.fail()
		default:
			wide = true
			i++
		}
	}
}

// hex4 is the value of four hex digits, -1 if they are not.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// String decodes the next value, which must be a string of valid UTF-8
// whose escapes name no lone surrogate (encoding/json would put U+FFFD
// there: not handled).
func (s *Scanner) String() (string, bool) {
	if s.peek() != '"' {
		return "", s.fail()
	}
	raw, esc, wide, ok := s.scanString()
	if !ok || wide && !utf8.Valid(raw) {
		return "", s.fail()
	}
	if !esc {
		return string(raw), true
	}
	out, ok := unescape(raw)
	if !ok {
		return "", s.fail()
	}
	return out, true
}

// StringOf is String, returning the one of known that the value equals
// (without escapes) instead of a copy: no allocation for the few values a
// member is expected to have.
func (s *Scanner) StringOf(known ...string) (string, bool) {
	if s.peek() != '"' {
		return "", s.fail()
	}
	start := s.pos
	raw, esc, _, ok := s.scanString()
	if !ok {
		return "", false
	}
	if !esc {
		for _, k := range known {
			if string(raw) == k {
				return k, true
			}
		}
	}
	s.pos = start
	return s.String()
}

// unescape is the contents raw of a string with checked escapes, decoded.
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			out = append(out, raw[i:j]...)
			i = j
			continue
		}
		switch e := raw[i+1]; e {
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return "", false
				}
				r = utf16.DecodeRune(r, hex4(raw[i+2:]))
				if r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default:
			out = append(out, unescaped[e])
			i += 2
		}
	}
	return string(out), true
}

// unescaped maps a one-letter escape to its byte.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// Null consumes the next value if it is null and reports whether it was.
func (s *Scanner) Null() bool {
	if s.peek() == 'n' && s.literal("null") {
		return true
	}
	return false
}

// literal consumes lit at pos (true, false or null).
func (s *Scanner) literal(lit string) bool {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.fail()
	}
	s.pos += len(lit)
	return true
}

// Raw skips the next value and returns its bytes (aliasing the input), as
// encoding/json gives a json.RawMessage field.
func (s *Scanner) Raw() ([]byte, bool) {
	if s.peek() == 0 {
		return nil, s.fail()
	}
	start := s.pos
	if !s.Skip() {
		return nil, false
	}
	return s.data[start:s.pos], true
}

// Skip checks and passes over the next value.
func (s *Scanner) Skip() bool {
	switch s.peek() {
	case '{':
		for range s.Members() {
			if !s.Skip() {
				return false
			}
		}
		return !s.bad
	case '[':
		return s.skipArray()
	case '"':
		_, _, _, ok := s.scanString()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *Scanner) skipArray() bool {
	for range s.Elements() {
		if !s.Skip() {
			return false
		}
	}
	return !s.bad
}

// number passes over a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) number() bool {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return s.fail()
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return s.fail()
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return s.fail()
		}
		i = j
	}
	s.pos = i
	return true
}

// digits is the index past the decimal digits of d at i.
func digits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// Members enters the object that is the next value and yields its member
// names, each time at the member's value, which the loop body must read
// or skip. The loop ends at the object's end, or when the input fails
// (see [Scanner.Failed]): a value that is not an object yields nothing and
// spends the Scanner.
func (s *Scanner) Members() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if !s.object() {
			return
		}
		for {
			k, ok := s.key()
			if !ok || !yield(k) {
				return
			}
		}
	}
}

// Elements enters the array that is the next value and yields the index
// of each element, each time at the element, which the loop body must read
// or skip. The loop ends at the array's end, or when the input fails (see
// [Scanner.Failed]): a value that is not an array yields nothing and
// spends the Scanner.
func (s *Scanner) Elements() iter.Seq[int] {
	return func(yield func(int) bool) {
		if s.peek() != '[' || s.depth >= maxDepth {
			s.fail()
			return
		}
		s.pos++
		s.depth++
		s.skipSpace()
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			s.depth--
			return
		}
		for i := 0; ; i++ {
			if !yield(i) || s.bad {
				return
			}
			s.skipSpace()
			if s.pos >= len(s.data) {
				s.fail()
				return
			}
			switch s.data[s.pos] {
			case ',':
				s.pos++
			case ']':
				s.pos++
				s.depth--
				return
			default:
				s.fail()
				return
			}
		}
	}
}

// Seen records which of up to 64 members a walk has read, for it to give
// up on a name that comes twice (encoding/json takes the last).
type Seen uint64

// Once reports whether member i is seen for the first time, and marks it.
func (s *Seen) Once(i uint) bool {
	if *s&(1<<i) != 0 {
		return false
	}
	*s |= 1 << i
	return true
}
