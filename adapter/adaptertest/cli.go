package adaptertest

import (
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// FlagCase is one row of a vendor's options → command-line table (ADP-3).
type FlagCase struct {
	// Name names the case in failures.
	Name string
	// Options are the run's options.
	Options drover.Options
	// Arg is the vendor's second argument to its Args, if it takes one
	// (Gemini's policy path, OpenCode's prompt).
	Arg string
	// Want is the command line, arguments joined by spaces.
	Want string
}

// Flags checks args against every case, comparing CommandLine of its
// result with Want.
func Flags(t *testing.T, args func(o drover.Options, arg string) ([]string, error), cases []FlagCase) {
	t.Helper()
	for _, c := range cases {
		got, err := args(c.Options, c.Arg)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if s := CommandLine(got); s != c.Want {
			t.Errorf("%s:\n got %s\nwant %s", c.Name, s, c.Want)
		}
	}
}

// CommandLine joins args with spaces, showing an empty argument as "".
func CommandLine(args []string) string {
	shown := slices.Clone(args)
	for i, a := range shown {
		if a == "" {
			shown[i] = `""`
		}
	}
	return strings.Join(shown, " ")
}

// HasEnv checks that env has every entry of want; a want ending in "="
// only needs an entry with that name.
func HasEnv(t *testing.T, env []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(env, func(e string) bool { return e == w || strings.HasSuffix(w, "=") && strings.HasPrefix(e, w) }) {
			t.Errorf("env lacks %s", w)
		}
	}
}
