//go:build linux

package contain

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-run/drover"
	"go.uber.org/goleak"
)

// The contained programs are this test binary re-executed with probeEnv
// set: TestMain then runs the probe instead of the tests. Started through
// Command, the binary is first the launcher (init) and then, exec'd with
// the restriction, the probe.
const probeEnv = "CONTAIN_TEST_PROBE"

func TestMain(m *testing.M) {
	if ops := os.Getenv(probeEnv); ops != "" {
		os.Exit(probe(ops))
	}
	goleak.VerifyTestMain(m)
}

// probe runs ops ("write:PATH", "read:PATH", "mkdir:PATH", "remove:PATH",
// "rename:FROM>TO", "env", "nested:PATH" separated by "|") and prints one
// JSON object of what each gave: "ok", or the errno's name.
func probe(ops string) int {
	out := map[string]string{}
	for _, op := range strings.Split(ops, "|") {
		verb, arg, _ := strings.Cut(op, ":")
		var err error
		switch verb {
		case "write":
			err = os.WriteFile(arg, []byte("x"), 0o600)
		case "read":
			_, err = os.ReadFile(arg)
		case "mkdir":
			err = os.Mkdir(arg, 0o700)
		case "remove":
			err = os.Remove(arg)
		case "rename":
			from, to, _ := strings.Cut(arg, ">")
			err = os.Rename(from, to)
		case "env":
			if v, ok := os.LookupEnv(Var); ok {
				err = errors.New("launcher variable left set: " + v)
			}
		case "nested":
			// A program the contained one starts, without any launcher of
			// its own: a shell writing arg.
			err = exec.Command("/bin/sh", "-c", "echo x > "+arg).Run()
		default:
			err = errors.New("unknown op " + verb)
		}
		out[op] = result(err)
	}
	b, _ := json.Marshal(out)
	os.Stdout.Write(append(b, '\n'))
	return 0
}

func result(err error) string {
	var errno syscall.Errno
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return errnoName(errno)
	case errors.As(err, &ee):
		return "exit " + ee.String()
	}
	return err.Error()
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EXDEV:
		return "EXDEV"
	case syscall.ENOENT:
		return "ENOENT"
	}
	return e.Error()
}

func needLandlock(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("this kernel cannot contain: %v", err)
	}
}

// runProbe runs the probe contained by p (or, with p nil, not contained)
// and returns what each op gave.
func runProbe(t *testing.T, p *Policy, ops ...string) map[string]string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), probeEnv+"="+strings.Join(ops, "|"), "GORACE=atexit_sleep_ms=0")
	if p != nil {
		launcher, entry, err := Command(*p, exe)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Path = launcher
		cmd.Env = append(cmd.Env, entry)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, stderr.String())
	}
	got := map[string]string{}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe said %q: %v", out, err)
	}
	return got
}

// want checks that each op gave its expected result.
func want(t *testing.T, got map[string]string, expect map[string]string) {
	t.Helper()
	for _, op := range slices.Sorted(maps.Keys(expect)) {
		if got[op] != expect[op] {
			t.Errorf("%s: got %s, want %s", op, got[op], expect[op])
		}
	}
}

// files writes content to each of paths.
func files(t *testing.T, content string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func absent(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists: written from outside the boundary (%v)", p, err)
		}
	}
}

// TestWriteBoundary: a contained process writes, creates, removes and
// renames inside its write directories; outside them every change fails
// with EACCES and leaves nothing, while
// reading stays possible everywhere; the devices stay writable; the
// launcher's variable is gone from its environment. Uncontained, the same
// writes succeed (the test can fail).
func TestWriteBoundary(t *testing.T) {
	needLandlock(t)
	in, out := t.TempDir(), t.TempDir()
	files(t, "old", filepath.Join(out, "old"), filepath.Join(in, "moved"), filepath.Join(in, "gone"))
	ops := map[string]string{
		"write:" + filepath.Join(in, "a"):                                          "ok",
		"mkdir:" + filepath.Join(in, "d"):                                          "ok",
		"remove:" + filepath.Join(in, "gone"):                                      "ok",
		"write:" + filepath.Join(out, "b"):                                         "EACCES",
		"write:" + filepath.Join(out, "old"):                                       "EACCES",
		"mkdir:" + filepath.Join(out, "d"):                                         "EACCES",
		"remove:" + filepath.Join(out, "old"):                                      "EACCES",
		"rename:" + filepath.Join(in, "moved") + ">" + filepath.Join(out, "moved"): "EACCES",
		"read:" + filepath.Join(out, "old"):                                        "ok",
		"read:/etc/passwd":                                                         "ok",
		"write:/dev/null":                                                          "ok",
		"nested:" + filepath.Join(out, "shell"):                                    "exit exit status 2",
		"nested:" + filepath.Join(in, "shell"):                                     "ok",
		"env":                                                                      "ok",
	}
	got := runProbe(t, &Policy{Write: []string{in}}, slices.Collect(maps.Keys(ops))...)
	want(t, got, ops)
	absent(t, filepath.Join(out, "b"), filepath.Join(out, "d"), filepath.Join(out, "moved"), filepath.Join(out, "shell"))
	if b, _ := os.ReadFile(filepath.Join(out, "old")); string(b) != "old" {
		t.Errorf("a file outside was changed: %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(in, "shell")); err != nil || string(b) != "x\n" {
		t.Errorf("the nested shell's write inside: %q, %v", b, err)
	}

	// Not contained, the same writes outside succeed.
	free := runProbe(t, nil, "write:"+filepath.Join(out, "b"), "mkdir:"+filepath.Join(out, "d"))
	want(t, free, map[string]string{"write:" + filepath.Join(out, "b"): "ok", "mkdir:" + filepath.Join(out, "d"): "ok"})
}

// TestReadBoundary: with a read boundary, reading outside it (and outside
// the write directories and the system's) fails with EACCES; inside it,
// in the write directories and in /etc it works.
func TestReadBoundary(t *testing.T) {
	needLandlock(t)
	in, readable, secret := t.TempDir(), t.TempDir(), t.TempDir()
	files(t, "x", filepath.Join(in, "w"), filepath.Join(readable, "r"), filepath.Join(secret, "s"))
	ops := map[string]string{
		"read:" + filepath.Join(in, "w"):        "ok",
		"read:" + filepath.Join(readable, "r"):  "ok",
		"read:" + filepath.Join(secret, "s"):    "EACCES",
		"read:/etc/passwd":                      "ok",
		"write:" + filepath.Join(readable, "x"): "EACCES",
	}
	got := runProbe(t, &Policy{Write: []string{in}, Read: []string{readable}}, slices.Collect(maps.Keys(ops))...)
	want(t, got, ops)

	// Without a read boundary the secret is readable.
	free := runProbe(t, &Policy{Write: []string{in}}, "read:"+filepath.Join(secret, "s"))
	want(t, free, map[string]string{"read:" + filepath.Join(secret, "s"): "ok"})
}

// TestLauncherFailsClosed: a launcher that cannot apply its policy (a
// write directory it cannot open: a symbolic link loop), or reads a bad
// variable, ends with 126 and a message; the target never runs.
func TestLauncherFailsClosed(t *testing.T) {
	needLandlock(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(launch{Policy: Policy{Write: []string{loop}}, Path: exe})
	for i, v := range []string{string(good), "not json", `{"write":[]}`} {
		marker := filepath.Join(dir, fmt.Sprint("ran", i))
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), probeEnv+"=write:"+marker, Var+"="+v)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 126 || !strings.Contains(stderr.String(), "drover: contain") {
			t.Errorf("launcher with %s: %v, stderr %q", v, err, stderr.String())
		}
		absent(t, marker)
	}
}

// TestCommand: relative paths are refused; the entry names Var.
func TestCommand(t *testing.T) {
	needLandlock(t)
	if _, _, err := Command(Policy{Write: []string{"rel"}}, "/bin/true"); err == nil {
		t.Error("a relative write directory was accepted")
	}
	if _, _, err := Command(Policy{}, "true"); err == nil {
		t.Error("a relative program was accepted")
	}
	launcher, entry, err := Command(Policy{Write: []string{"/tmp"}}, "/bin/true")
	if err != nil || launcher == "" || !strings.HasPrefix(entry, Var+"=") {
		t.Fatalf("Command: %q %q %v", launcher, entry, err)
	}
}

func TestWithinAndResolve(t *testing.T) {
	for _, c := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true}, {"/a", "/a", true}, {"/a/", "/a", true}, {"/ab", "/a", false},
		{"/a", "/a/b", false}, {"/x", "/", true}, {"/a/../b", "/a", false},
	} {
		if got := Within(c.path, c.dir); got != c.want {
			t.Errorf("Within(%q, %q) = %v", c.path, c.dir, got)
		}
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	rdir, _ := filepath.EvalSymlinks(dir)
	if got, want := Resolve(filepath.Join(dir, "link", "not", "yet")), filepath.Join(rdir, "real", "not", "yet"); got != want {
		t.Errorf("Resolve = %s, want %s", got, want)
	}
}

// TestSEC2_Decide: asking for containment in a tier where the agent
// sandboxes its commands itself, or on a kernel that cannot contain, is
// UNSUPPORTED_OPTION; by default such a run goes on uncontained, saying
// why; an explicit "no" and the autonomous tier are not contained. An
// agent that sandboxes its commands itself only headless (ContainLive) is
// contained in a run that can be answered or steered.
func TestSEC2_Decide(t *testing.T) {
	yes, no := true, false
	can := func() error { return nil }
	cannot := func() error { return ErrUnavailable }
	sandboxed := drover.Capabilities{Tiers: drover.Tiers(), Contain: []drover.Tier{drover.TierAutonomous}}
	headless := drover.Capabilities{Tiers: drover.Tiers(), Contain: []drover.Tier{drover.TierAutonomous}, ContainLive: []drover.Tier{drover.TierSupervised}}
	every := drover.Capabilities{Tiers: drover.Tiers()}
	for _, c := range []struct {
		name      string
		o         drover.Options
		caps      drover.Capabilities
		live      bool
		available func() error
		want      Decision
		refused   bool
	}{
		{"default", drover.Options{}, every, false, can, Decision{On: true}, false},
		{"autonomous", drover.Options{Tier: drover.TierAutonomous}, every, false, can, Decision{Reason: "autonomous"}, false},
		{"off", drover.Options{Contain: &no}, every, false, can, Decision{Reason: "off"}, false},
		{"explicit autonomous", drover.Options{Tier: drover.TierAutonomous, Contain: &yes}, every, false, can, Decision{On: true}, false},
		{"vendor sandbox", drover.Options{}, sandboxed, false, can, Decision{Reason: "vendor sandbox"}, false},
		{"vendor sandbox live", drover.Options{}, sandboxed, true, can, Decision{Reason: "vendor sandbox"}, false},
		{"vendor sandbox asked", drover.Options{Contain: &yes}, sandboxed, false, can, Decision{}, true},
		{"sandboxed vendor, autonomous asked", drover.Options{Tier: drover.TierAutonomous, Contain: &yes}, sandboxed, false, can, Decision{On: true}, false},
		{"headless-only sandbox, live", drover.Options{}, headless, true, can, Decision{On: true}, false},
		{"headless-only sandbox, live asked", drover.Options{Contain: &yes}, headless, true, can, Decision{On: true}, false},
		{"headless-only sandbox, headless", drover.Options{}, headless, false, can, Decision{Reason: "vendor sandbox"}, false},
		{"headless-only sandbox, headless asked", drover.Options{Contain: &yes}, headless, false, can, Decision{}, true},
		{"headless-only sandbox, live dry-run", drover.Options{Tier: drover.TierDryRun}, headless, true, can, Decision{Reason: "vendor sandbox"}, false},
		{"headless-only sandbox, live, no landlock", drover.Options{}, headless, true, cannot, Decision{Reason: "landlock unavailable"}, false},
		{"no landlock", drover.Options{}, every, false, cannot, Decision{Reason: "landlock unavailable"}, false},
		{"no landlock asked", drover.Options{Contain: &yes}, every, false, cannot, Decision{}, true},
	} {
		d, err := Decide(c.o, c.caps, c.live, c.available)
		if refused := drover.CodeOf(err, "") == drover.CodeUnsupportedOption; refused != c.refused || err != nil && !c.refused {
			t.Errorf("%s: err %v, want refused %v", c.name, err, c.refused)
		}
		if d != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, d, c.want)
		}
	}
}

// TestInRoots: a path is in the roots when it is one or lies beneath one
// once resolved, so that a link out of a root, or a ".." climbing out of
// one, is outside; a file not created yet counts where it would be made;
// a relative path is in none; "/" holds every absolute path.
func TestInRoots(t *testing.T) {
	dir := t.TempDir()
	ws, other, out := filepath.Join(dir, "ws"), filepath.Join(dir, "other"), filepath.Join(dir, "out")
	for _, d := range []string{ws, other, out} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(out, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(out, "back")); err != nil {
		t.Fatal(err)
	}
	roots := []string{Resolve(ws), Resolve(other)}
	for _, c := range []struct {
		path string
		want bool
	}{
		{ws, true},
		{filepath.Join(ws, "a.go"), true},
		{filepath.Join(ws, "new", "dir", "f.go"), true},
		{filepath.Join(other, "f"), true},
		{filepath.Join(out, "back", "f"), true},
		{filepath.Join(ws, "link"), false},
		{filepath.Join(ws, "link", "f"), false},
		{filepath.Join(ws, "link", "new", "f"), false},
		{ws + "/../out/f", false},
		{ws + "/sub/../../out/f", false},
		{ws + "/sub/../f", true},
		{ws + "x/f", false},
		{dir, false},
		{"a.go", false},
		{"", false},
	} {
		if got := InRoots(c.path, roots); got != c.want {
			t.Errorf("InRoots(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if !InRoots(filepath.Join(out, "f"), []string{"/"}) || InRoots("f", []string{"/"}) {
		t.Error(`the root "/" does not hold every absolute path, and only those`)
	}
	if InRoots(filepath.Join(ws, "f"), nil) {
		t.Error("a path is in no roots at all")
	}
}
