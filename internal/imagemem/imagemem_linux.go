package imagemem

import (
	"bytes"
	"debug/elf"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// span is a page-aligned range of the running image's virtual memory.
type span struct{ start, end uintptr }

// Release drops the process's mappings of the pages of its own
// executable that can never have been written: the code and read-only
// data of a statically linked, position-dependent executable (what
// drover ships: CGO_ENABLED=0). It returns how many bytes of address
// space it advised away (resident or not). It does nothing, returning 0
// and no error, for an executable it cannot prove read-only throughout
// (a position-independent or dynamically linked one, whose read-only
// segments may hold relocations applied at load time), while a debugger
// is attached (its breakpoints are private copies of code pages, which
// Release would discard), and on systems other than Linux.
//
// Uprobes (perf, bpftrace) patch code pages the way a debugger does but
// do not show as a tracer: with KeepEnv set in the environment Release
// does nothing, for whoever probes drover that way.
//
// Release is safe to call at any time from any goroutine, concurrently
// with code running from the pages it drops: another goroutine that
// touches one takes a minor fault and maps it again.
func Release() (int64, error) {
	if os.Getenv(KeepEnv) != "" {
		return 0, nil
	}
	spans, err := readOnlySpans()
	if err != nil || len(spans) == 0 || traced() {
		return 0, err
	}
	var n int64
	for _, s := range spans {
		// MADV_DONTNEED on a private file mapping drops this process's
		// page table entries; the file's pages stay in the page cache
		// and a later access maps the file's (unchanged) contents again.
		// That is exact only for pages the process never wrote, hence
		// the checks in readOnlySpans and traced.
		// (unix.Madvise wants a []byte, which would need these addresses
		// turned into a pointer; the range is not Go memory.)
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED); errno != 0 {
			return n, os.NewSyscallError("madvise", errno)
		}
		n += int64(s.end - s.start)
	}
	return n, nil
}

// readOnlySpans is the executable's read-only loadable segments, found
// once: they do not change while the process lives.
var readOnlySpans = sync.OnceValues(func() ([]span, error) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return imageSpans(f, os.Getpagesize()), nil
})

// imageSpans is the whole pages of f's read-only loadable segments when
// f is a static, position-dependent executable (its segments are mapped
// at their link addresses, straight from the file), else none.
func imageSpans(f *elf.File, pageSize int) []span {
	if f.Type != elf.ET_EXEC {
		return nil
	}
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP, elf.PT_DYNAMIC, elf.PT_GNU_RELRO:
			return nil
		}
	}
	page := uint64(pageSize)
	var spans []span
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_W != 0 || p.Filesz == 0 {
			continue
		}
		// Only pages wholly inside the segment's file-backed part: a page
		// shared with a neighbouring writable segment, or the zero-filled
		// tail past Filesz, is not the file's unchanged contents.
		start := (p.Vaddr + page - 1) &^ (page - 1)
		end := (p.Vaddr + p.Filesz) &^ (page - 1)
		if end > start {
			spans = append(spans, span{uintptr(start), uintptr(end)})
		}
	}
	return spans
}

// traced reports whether a debugger or tracer is attached to the
// process (TracerPid in /proc/self/status is not 0).
func traced() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	_, rest, ok := bytes.Cut(b, []byte("\nTracerPid:"))
	if !ok {
		return true
	}
	pid, _, _ := bytes.Cut(rest, []byte("\n"))
	return string(bytes.TrimSpace(pid)) != "0"
}
