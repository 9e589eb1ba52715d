package runner

import (
	"errors"
	"io"
	"os"
)

// CopyIfAbsent copies the file src to dst (mode 0600) unless dst exists:
// how a run's own config home is seeded with the user's login without
// overwriting what the home already has (ADP-7). A missing src is not an
// error; there is nothing to seed.
func CopyIfAbsent(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer in.Close()
	// O_EXCL: a dst that appeared since the Stat (a parallel run seeding the
	// same home) is never truncated; this copy fails instead.
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
