package proc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/testkit/ptytest"
)

// injected is what the fakes below try to type into a terminal.
const injected = "echo pwned\n"

// runLinuxFake runs the fakes of the Linux-only tests; ok is false for a
// mode that is none of them.
//
//   - "tty-holder": drover with a controlling terminal (its stdin). With
//     arg "control" it types into that terminal itself, which shows the
//     kernel lets a holder of the terminal do it; else it starts the
//     "tty-agent" fake through Start, as drover starts an agent, and passes
//     on what the agent says.
//   - "tty-agent": an agent trying to type into drover's terminal: through
//     /dev/tty and through each standard descriptor.
//   - "reach": an agent signalling a process outside its run and
//     connecting to an abstract unix socket made outside it.
//   - "dial": an agent connecting to local TCP ports.
//   - "environ-holder", "environ-reader": a drover and its agent reading
//     drover's environment from /proc.
func runLinuxFake(mode string, out *bufio.Writer) (int, bool) {
	switch mode {
	case "tty-holder":
		if os.Getenv(fakeArgEnv) == "control" {
			printJSON(out, map[string]any{"control": errString(typeInto(0))})
			return 0, true
		}
		spec := Spec{Path: os.Args[0], Env: append(os.Environ(), fakeAgentEnv+"=tty-agent"), Grace: 5 * time.Second, DrainTimeout: 5 * time.Second}
		p, err := Start(context.Background(), spec)
		if err != nil {
			printJSON(out, map[string]any{"start": err.Error()})
			return 1, true
		}
		for line, err := range p.Lines() {
			if err != nil {
				break
			}
			out.Write(append(line, '\n'))
		}
		p.Wait()
		return 0, true
	case "tty-agent":
		said := map[string]string{}
		if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			said["/dev/tty"] = "open: " + err.Error()
		} else {
			said["/dev/tty"] = errString(typeInto(int(f.Fd())))
			f.Close()
		}
		for fd := range 3 {
			said[fmt.Sprint("fd", fd)] = errString(typeInto(fd))
		}
		printJSON(out, said)
		return 0, true
	case "environ-holder":
		if os.Getenv(fakeArgEnv) == "protect" {
			if err := ProtectSelf(func(name, _ string) bool { return strings.HasPrefix(name, "DROVER_") }); err != nil {
				printJSON(out, map[string]any{"protect": err.Error()})
				return 1, true
			}
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fakeAgentEnv+"=environ-reader")
		b, err := cmd.Output()
		if err != nil {
			printJSON(out, map[string]any{"reader": err.Error()})
			return 1, true
		}
		out.Write(b)
		return 0, true
	case "reach": // signal the process arg, connect to the abstract socket arg
		pid, name, _ := strings.Cut(os.Getenv(fakeArgEnv), ",")
		said := map[string]string{"signal": "sent", "connect": "connected"}
		if err := syscall.Kill(fakeArgInt(pid), 0); err != nil {
			said["signal"] = err.Error()
		}
		if c, err := net.Dial("unix", "@"+name); err != nil {
			said["connect"] = err.Error()
		} else {
			c.Close()
		}
		printJSON(out, said)
		return 0, true
	case "dial": // connect to each 127.0.0.1 port of the comma list arg
		said := map[string]string{}
		for _, port := range strings.Split(os.Getenv(fakeArgEnv), ",") {
			said[port] = "connected"
			if c, err := net.Dial("tcp", "127.0.0.1:"+port); err != nil {
				said[port] = err.Error()
			} else {
				c.Close()
			}
		}
		printJSON(out, said)
		return 0, true
	case "environ-reader":
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
		printJSON(out, map[string]any{"read": errString(err), "secret": strings.Contains(string(b), "DROVER_TOKEN=")})
		return 0, true
	}
	return 0, false
}

// typeInto pushes injected into the input of the terminal open as fd, a
// key at a time (TIOCSTI).
func typeInto(fd int) error {
	for i := range len(injected) {
		b := injected[i]
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSTI), uintptr(unsafe.Pointer(&b))); errno != 0 {
			return errno
		}
	}
	return nil
}

// errString is err's text, "typed" for nil.
func errString(err error) string {
	if err == nil {
		return "typed"
	}
	return err.Error()
}

// TestSEC5_AgentCannotTypeIntoTheTerminal: an agent drover starts holds no
// controlling terminal, so it cannot push keystrokes into the terminal of
// the drover that started it (TIOCSTI), which the shell would run once
// drover exits, or which would answer drover's own questions.
func TestSEC5_AgentCannotTypeIntoTheTerminal(t *testing.T) {
	slave := ptytest.Open(t)
	// hold runs the holder fake with the terminal as its controlling one,
	// and returns what it printed and how many bytes wait in the
	// terminal's input.
	hold := func(arg string) (string, int) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fakeAgentEnv+"=tty-holder", fakeArgEnv+"="+arg, "GORACE=atexit_sleep_ms=0")
		cmd.Stdin = slave
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = ptytest.AsControlling()
		if err := cmd.Run(); err != nil {
			t.Fatalf("holder %s: %v: %s", arg, err, out.String())
		}
		return out.String(), ptytest.InQueue(t, slave)
	}
	said, n := hold("control")
	var control struct{ Control string }
	if err := json.Unmarshal([]byte(said), &control); err != nil {
		t.Fatalf("holder said %q", said)
	}
	if control.Control != "typed" || n != len(injected) {
		t.Skipf("the kernel forbids TIOCSTI here (%s, %d bytes typed; dev.tty.legacy_tiocsti=0?): nothing to prove", control.Control, n)
	}
	drain(t, slave, n)

	said, n = hold("agent")
	if n != 0 {
		t.Errorf("the agent typed %d bytes into drover's terminal; it said %s", n, said)
	}
	var agent map[string]string
	if err := json.Unmarshal([]byte(said), &agent); err != nil || len(agent) != 4 {
		t.Fatalf("agent said %q", said)
	}
	if !strings.HasPrefix(agent["/dev/tty"], "open: ") {
		t.Errorf("the agent opened /dev/tty: %s", agent["/dev/tty"])
	}
}

// drain reads the n bytes waiting in the terminal's input.
func drain(t *testing.T, slave *os.File, n int) {
	t.Helper()
	if _, err := slave.Read(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
}

// TestSEC5_AgentCannotReadDroversEnvironment: after ProtectSelf, a process
// drover starts cannot read drover's token from /proc/<drover>/environ:
// as an ordinary user it cannot read that file at all (drover is not
// dumpable); as root, which reads any process's environ, it finds the
// token blanked. Without ProtectSelf it finds the token (the control). As
// root the test also runs both as nobody.
func TestSEC5_AgentCannotReadDroversEnvironment(t *testing.T) {
	users := []*syscall.Credential{nil}
	exe := os.Args[0]
	if os.Geteuid() == 0 {
		// nobody must be able to run this binary: a copy in a directory
		// anyone may enter.
		dir, err := os.MkdirTemp("", "proc-environ")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		exe = dir + "/proc.test"
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		users = append(users, &syscall.Credential{Uid: 65534, Gid: 65534})
	}
	for _, cred := range users {
		holder := func(arg string) map[string]any {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), fakeAgentEnv+"=environ-holder", fakeArgEnv+"="+arg, "DROVER_TOKEN=s3cret", "GORACE=atexit_sleep_ms=0")
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("holder %s: %v: %s", arg, err, out)
			}
			var said map[string]any
			if err := json.Unmarshal(out, &said); err != nil {
				t.Fatalf("holder %s said %q", arg, out)
			}
			return said
		}
		root := cred == nil && os.Geteuid() == 0
		if said := holder("open"); said["secret"] != true {
			t.Fatalf("root %v: without ProtectSelf the reader should see the token (the control): %v", root, said)
		}
		said := holder("protect")
		if said["secret"] != false {
			t.Errorf("root %v: after ProtectSelf the reader found drover's token: %v", root, said)
		}
		if !root && said["read"] == "typed" {
			t.Errorf("as an ordinary user the reader read drover's environ: %v", said)
		}
	}
}

// TestSEC5_ContainedCannotSignalOrReachOutside: a contained process cannot
// signal a process outside its run (drover itself here) nor connect to an
// abstract unix socket made outside it (Landlock ABI 6 scoping); an
// uncontained one can, which shows the probe works.
func TestSEC5_ContainedCannotSignalOrReachOutside(t *testing.T) {
	needLandlock(t)
	if contain.ABI() < 6 {
		t.Skipf("Landlock ABI %d has no scoping (6 and later)", contain.ABI())
	}
	name := fmt.Sprintf("drover-proc-test-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	accepting := make(chan struct{})
	defer func() { ln.Close(); <-accepting }()
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, contained := range []bool{false, true} {
		spec := fakeSpec(t, "reach", fmt.Sprintf("%d,%s", os.Getpid(), name))
		if contained {
			spec.Contain = &contain.Policy{Write: []string{t.TempDir()}}
		}
		p := startFake(t, context.Background(), spec)
		items := within(t, hangBound, "Lines", func() []item { return collect(p) })
		if len(items) != 1 || items[0].err != nil {
			t.Fatalf("items %v", items)
		}
		var said struct{ Signal, Connect string }
		if err := json.Unmarshal([]byte(items[0].line), &said); err != nil {
			t.Fatal(err)
		}
		if contained && (said.Signal == "sent" || said.Connect == "connected") || !contained && (said.Signal != "sent" || said.Connect != "connected") {
			t.Errorf("contained %v: %+v", contained, said)
		}
		p.Wait()
	}
}

// TestSEC5_ContainedNetworkPorts: a contained process whose policy
// restricts the network connects to the ports it allows and to no other
// (Landlock ABI 4); one without the restriction connects to both.
func TestSEC5_ContainedNetworkPorts(t *testing.T) {
	needLandlock(t)
	if contain.ABI() < 4 {
		t.Skipf("Landlock ABI %d cannot restrict connections (4 and later)", contain.ABI())
	}
	var ports []string
	var ls []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, ln)
		ports = append(ports, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
	}
	// The kernel completes connections to a listener's backlog without an
	// Accept; closing the listeners ends them.
	defer func() {
		for _, ln := range ls {
			ln.Close()
		}
	}()
	allowed := uint16(ls[0].Addr().(*net.TCPAddr).Port)
	for _, restricted := range []bool{false, true} {
		spec := fakeSpec(t, "dial", strings.Join(ports, ","))
		spec.Contain = &contain.Policy{Write: []string{t.TempDir()}, Net: restricted, Connect: []uint16{allowed}}
		p := startFake(t, context.Background(), spec)
		items := within(t, hangBound, "Lines", func() []item { return collect(p) })
		if len(items) != 1 || items[0].err != nil {
			t.Fatalf("items %v", items)
		}
		var said map[string]string
		if err := json.Unmarshal([]byte(items[0].line), &said); err != nil {
			t.Fatal(err)
		}
		if said[ports[0]] != "connected" || (said[ports[1]] == "connected") == restricted {
			t.Errorf("restricted %v to port %s: %v", restricted, ports[0], said)
		}
		p.Wait()
	}
}
