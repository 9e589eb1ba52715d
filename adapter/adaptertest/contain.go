package adaptertest

import (
	"slices"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// Preparer is an adapter that prepares its vendor process; every adapter
// built on runner.Base is one.
type Preparer interface {
	Prepare(req drover.Request) (*runner.Launch, error)
}

// WritableCase is one row of a vendor's options → own writable state
// table (SEC-2): what a contained run of it may write besides its
// workspace and TMPDIR.
type WritableCase struct {
	// Name names the case in failures.
	Name string
	// Options are the run's options.
	Options drover.Options
	// Dirs and Files are Launch.Writable and Launch.WritableFiles, in any
	// order.
	Dirs, Files []string
}

// Writable checks the vendor's own writable state of each case, as its
// Prepare declares it, and runs each Launch's Cleanup.
func Writable(t *testing.T, a Preparer, cases []WritableCase) {
	t.Helper()
	for _, c := range cases {
		l, err := a.Prepare(drover.Request{Prompt: "p", Options: c.Options})
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if l.Cleanup != nil {
			defer l.Cleanup()
		}
		for _, f := range []struct {
			what      string
			got, want []string
		}{{"dirs", l.Writable, c.Dirs}, {"files", l.WritableFiles, c.Files}} {
			got, want := slices.Sorted(slices.Values(f.got)), slices.Sorted(slices.Values(f.want))
			if !slices.Equal(got, want) {
				t.Errorf("%s: writable %s\n got %q\nwant %q", c.Name, f.what, got, want)
			}
		}
	}
}
