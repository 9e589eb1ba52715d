// Package private keeps drover's own state private to its user (BND-3):
// the ledger's files, drover's state and configuration directories and the
// files drover keeps there. Landlock, which holds a run's write boundary,
// restricts writing, not chmod, chown or utime: a contained agent cannot
// rewrite the ledger, but it can change its mode. So drover creates its
// files 0600 and its directories 0700, and Keep sets back a mode something
// changed whenever drover opens them.
package private

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
)

// Modes of drover's own state.
const (
	FileMode fs.FileMode = 0o600
	DirMode  fs.FileMode = 0o700
)

// Keep checks drover's own file or directory at path, named what in
// messages ("ledger", "config directory"): it must belong to this
// process's user, else the error says whose it is. A mode with any bit for
// group or others, or without the owner's read and write (and, for a
// directory, search), is set back to FileMode or DirMode and the repair is
// logged to log at warn level (nil: not logged). A missing path is fine:
// there is nothing to keep. On systems without Unix modes it does nothing.
func Keep(path, what string, log *slog.Logger) error {
	return keep(path, what, log)
}

// CreateFile creates an empty file of drover's own at path with FileMode,
// whatever the umask, unless there is one already.
func CreateFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// A umask may have taken bits off; Keep would then take the file's
	// own mode for tampering.
	return errors.Join(f.Chmod(FileMode), f.Close())
}
