//go:build linux

package contain

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's filesystem access rights, grouped as drover grants them. Read
// rights are handled only for a policy with a read boundary; without one
// the kernel does not restrict reading at all. Executing is a read right.
const (
	readRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// writeRights is everything that changes the file system.
	writeRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	// deviceRights are what a device of devices gets: writing to it (with
	// O_TRUNC too, as a shell's "> /dev/null" opens it), not creating or
	// removing anything next to it.
	deviceRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	// fileRights are the rights that apply to a file (not a directory).
	fileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// known returns the filesystem rights Landlock ABI version v knows:
// thirteen in v1, REFER from v2, TRUNCATE from v3, IOCTL_DEV from v5.
func known(v int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1)
	if v >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if v >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if v >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

// abiVersion asks the kernel for its Landlock ABI version once.
var abiVersion = sync.OnceValues(func() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		// ENOSYS: a kernel built without it; EOPNOTSUPP: not enabled at boot.
		return 0, fmt.Errorf("%w: %v", ErrUnavailable, errno)
	}
	return int(v), nil
})

// Available reports whether the kernel can contain processes: nil, or an
// error wrapping ErrUnavailable that says why not.
func Available() error {
	_, err := abiVersion()
	return err
}

// ABI returns the kernel's Landlock ABI version, 0 when it has none.
func ABI() int {
	v, _ := abiVersion()
	return v
}

// restrictAndExec restricts this thread by p and execs path with argv and
// env; it returns only on failure.
//
// Landlock restricts the calling thread, and other threads of the Go
// runtime would stay free; so the thread that is restricted is the one
// that execs (locked to this goroutine), and execve ends every other. The
// program it starts, a single thread, has the restriction and passes it to
// everything it starts.
func restrictAndExec(p Policy, path string, argv, env []string) error {
	runtime.LockOSThread()
	v, err := abiVersion()
	if err != nil {
		return err
	}
	handled := uint64(writeRights)
	if p.Read != nil {
		handled |= readRights
	}
	handled &= known(v)
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	if p.Net {
		if v < netABI {
			return fmt.Errorf("landlock ABI %d cannot restrict connections", v)
		}
		attr.Access_net = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if v >= 6 {
		// Signals and abstract unix sockets are scoped to the domain: a
		// contained process cannot signal drover, other runs or the user's
		// shell, nor connect to an abstract socket made outside (SEC-5).
		// Its own children share its domain, so it still signals them.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	ruleset := int(r)
	defer unix.Close(ruleset)
	read := uint64(0)
	if p.Read != nil {
		read = readRights
	}
	var rules []rule
	for _, d := range p.Write {
		rules = append(rules, rule{d, writeRights | read})
	}
	for _, d := range devices {
		rules = append(rules, rule{d, deviceRights | read})
	}
	if p.Read != nil {
		for _, d := range slices.Concat(p.Read, systemRead, []string{filepath.Dir(Resolve(path))}) {
			rules = append(rules, rule{d, readRights})
		}
	}
	for _, rl := range rules {
		if err := rl.add(ruleset, handled); err != nil {
			return err
		}
	}
	for _, port := range p.Connect {
		if !p.Net {
			break
		}
		attr := netPortAttr{access: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), ruleNetPort,
			uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock_add_rule port %d: %w", port, errno)
		}
	}
	// Required of an unprivileged restrict_self, and what keeps a
	// contained program from gaining privileges by exec (set-user-ID).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return syscall.Exec(path, argv, env)
}

// netPortAttr is the kernel's struct landlock_net_port_attr, and
// ruleNetPort its rule type (x/sys does not have them yet).
type netPortAttr struct {
	access uint64
	port   uint64
}

const ruleNetPort = 2

// rule allows access beneath path.
type rule struct {
	path   string
	access uint64
}

// add adds r to the ruleset, with only the rights that are handled and,
// for a file, those that apply to files. A path that does not exist is
// skipped: there is nothing beneath it to allow.
func (r rule) add(ruleset int, handled uint64) error {
	fd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", r.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", r.path, err)
	}
	access := r.access & handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fileRights
	}
	if access == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule %s: %w", r.path, errno)
	}
	return nil
}
