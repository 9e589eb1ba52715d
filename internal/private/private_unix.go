//go:build unix

package private

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
)

func keep(path, what string, log *slog.Logger) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return fmt.Errorf("%s %s is neither a file nor a directory (%s)", what, path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return fmt.Errorf("%s %s belongs to uid %d, not to drover's user (uid %d): drover does not use another user's state (if it is yours, chown it back)", what, path, st.Uid, uid)
		}
	}
	perm, want := fi.Mode().Perm(), FileMode
	if fi.IsDir() {
		want = DirMode
	}
	if !needsRepair(perm, want) {
		return nil
	}
	if err := os.Chmod(path, want); err != nil {
		return fmt.Errorf("%s %s: mode %04o: %w", what, path, perm, err)
	}
	if log != nil {
		log.Warn(fmt.Sprintf("%s mode was %04o, repaired to %04o: something changed it", what, perm, want), "path", path)
	}
	return nil
}

// needsRepair reports whether perm, the mode of drover's own file or
// directory whose mode should be want, lets others in or shuts its owner
// out.
func needsRepair(perm, want fs.FileMode) bool {
	return perm&0o077 != 0 || perm&want != want
}
