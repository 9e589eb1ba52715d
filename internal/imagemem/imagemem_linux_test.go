package imagemem

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// subject builds testdata/release with the given extra go build flags
// and environment, runs it in that environment and returns its report.
func subject(t *testing.T, env []string, flags ...string) (report struct {
	Released                  int64
	Err                       string
	FileKBBefore, FileKBAfter int64
	SumBefore, SumAfter       uint64
}) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "release")
	args := append([]string{"build", "-o", exe}, flags...)
	build := exec.Command("go", append(args, "./testdata/release")...)
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", flags, err, out)
	}
	var stderr bytes.Buffer
	run := exec.Command(exe)
	run.Env = build.Env
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", exe, err, stderr.Bytes())
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if report.Err != "" {
		t.Fatalf("Release: %s", report.Err)
	}
	if report.SumBefore != report.SumAfter {
		t.Fatalf("the image read back differently after Release: %d, then %d", report.SumBefore, report.SumAfter)
	}
	return report
}

// PERF-2: drover's image as it ships (static, CGO_ENABLED=0) gives its
// code and read-only data pages back, and keeps working from them.
func TestPERF2_StaticImageReleased(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	r := subject(t, []string{"CGO_ENABLED=0"})
	if r.Released < 1<<20 {
		t.Fatalf("released %d bytes of address space, want the image's read-only segments (over 1 MiB)", r.Released)
	}
	// The subject touched all of unicode's tables and fmt before; after
	// Release only what reading its status touches is mapped again.
	if r.FileKBAfter > r.FileKBBefore*3/4 {
		t.Fatalf("RssFile %d kB before Release, %d kB after: want under three quarters", r.FileKBBefore, r.FileKBAfter)
	}
}

// PERF-2: DROVER_KEEP_IMAGE keeps the image as it is (for uprobes, which
// a release would drop).
func TestPERF2_KeepImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	if r := subject(t, []string{"CGO_ENABLED=0", KeepEnv + "=1"}); r.Released != 0 {
		t.Fatalf("released %d bytes with %s set, want 0", r.Released, KeepEnv)
	}
}

// PERF-2: an image whose read-only segments may hold load-time
// relocations (position-independent, or linked dynamically with cgo) is
// left alone: dropping a relocated page would map the file's unrelocated
// bytes back.
func TestPERF2_RelocatedImageLeftAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	cases := map[string]struct {
		env   []string
		flags []string
	}{
		"pie": {env: []string{"CGO_ENABLED=0"}, flags: []string{"-buildmode=pie"}},
	}
	if _, err := exec.LookPath("gcc"); err == nil {
		cases["cgo"] = struct {
			env   []string
			flags []string
		}{env: []string{"CGO_ENABLED=1"}, flags: []string{"-tags", "netcgo", "-ldflags=-linkmode=external"}}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if r := subject(t, c.env, c.flags...); r.Released != 0 {
				t.Fatalf("released %d bytes of a %s image, want 0", r.Released, name)
			}
		})
	}
}
