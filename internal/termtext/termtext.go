// Package termtext makes text from a model or a vendor inert where a
// person reads it on a terminal (SEC-6): Strip for prose, Quote for a
// command or an argument that must be seen exactly.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const esc = 0x1b

// Strip returns s for display as prose, with nothing a terminal would act
// on: every escape sequence is removed whole (CSI "ESC [" to its final byte
// 0x40–0x7E; OSC "ESC ]" to BEL or ST; DCS, SOS, PM and APC "ESC P", "ESC
// X", "ESC ^", "ESC _" to ST; the two- and three-byte ESC sequences), as
// are the C1 controls U+0080–U+009F (the introducers among them, U+009B
// CSI, U+009D OSC, U+0090, U+0098, U+009E and U+009F, with their
// sequences), the C0 controls but newline and tab (so carriage return,
// backspace and BEL go), DEL, and the bidirectional controls U+061C,
// U+200E, U+200F, U+202A–U+202E and U+2066–U+2069, which would reorder
// what is shown. A sequence cut off by the end of s is removed through
// that end; an escape or control sequence broken by a byte that cannot
// continue it ends before that byte, which is then treated as any other.
// Invalid UTF-8 bytes become U+FFFD, so the result is valid UTF-8.
// Text with none of these is returned as it is, without a copy.
func Strip(s string) string {
	i := cleanPrefix(s, stripped)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == esc:
			i = skipEscape(s, i+n)
			continue
		case r == 0x9b:
			i = skipCSI(s, i+n)
			continue
		case r == 0x9d:
			i = skipString(s, i+n, true)
			continue
		case r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f:
			i = skipString(s, i+n, false)
			continue
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case !stripped(r):
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// cleanPrefix returns the length of the longest start of s that is valid
// UTF-8 and holds no rune marked.
func cleanPrefix(s string, marked func(rune) bool) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || marked(r) {
			return i
		}
		i += n
	}
	return i
}

// stripped reports whether Strip removes r (a sequence's introducer with
// its sequence).
func stripped(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || isC1(r) || isBidi(r)
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

func isBidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// skipEscape returns where the sequence begun by the ESC before s[i] ends.
// A byte that cannot continue it ends it unconsumed, so that the text
// after a broken sequence is kept.
func skipEscape(s string, i int) int {
	if i == len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']':
		return skipString(s, i+1, true)
	case 'P', 'X', '^', '_':
		return skipString(s, i+1, false)
	}
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f { // intermediate bytes
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		return i + 1
	}
	return i
}

// skipCSI returns where the control sequence whose parameters begin at
// s[i] ends: after its final byte.
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f { // parameter and intermediate bytes
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		return i + 1
	}
	return i
}

// skipString returns where the control string (OSC, DCS, SOS, PM, APC)
// whose content begins at s[i] ends: after its ST (ESC \ or U+009C), or
// its BEL if bel. Another ESC ends it and begins a sequence of its own, as
// it does on a terminal.
func skipString(s string, i int, bel bool) int {
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0x07 && bel:
			return i + 1
		case c == esc:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i
		case c == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c:
			return i + 2
		}
	}
	return i
}

// Quote returns s, a command or an argument a person is asked about, with
// nothing removed and every character that would act on a terminal or not
// show shown as an escape instead: ESC as \e; newline, tab and carriage
// return as \n, \t, \r; the other C0 controls and DEL as \xNN; the C1
// controls, the format characters (the bidirectional controls, zero-width
// characters, U+FEFF, …) and the line and paragraph separators as \uNNNN
// (\UNNNNNNNN above U+FFFF); an invalid UTF-8 byte as \xNN. Backslashes
// are not doubled: a backslash typed in s reads as it is, so `\e` in the
// result is ESC or the two characters, and nothing in s is hidden either
// way. s with none of these is returned as it is, without a copy.
func Quote(s string) string {
	i := cleanPrefix(s, escaped)
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
		case named[r] != "":
			b.WriteString(named[r])
		case r < 0x20 || r == 0x7f:
			writeHex(&b, `\x`, uint32(r), 2)
		case escaped(r) && r > 0xffff:
			writeHex(&b, `\U`, uint32(r), 8)
		case escaped(r):
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// named are the controls Quote shows by a name.
var named = map[rune]string{esc: `\e`, '\n': `\n`, '\t': `\t`, '\r': `\r`}

// escaped reports whether Quote shows r as an escape.
func escaped(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= utf8.RuneSelf && (isC1(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp))
}

func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[v>>shift&0xf])
	}
}
