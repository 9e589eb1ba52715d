//go:build !linux

package contain

import (
	"errors"
	"fmt"
)

// Available reports whether the kernel can contain processes: never on
// this platform (Landlock is Linux's).
func Available() error { return fmt.Errorf("%w: containment needs Linux", ErrUnavailable) }

// ABI returns the kernel's Landlock ABI version: 0 on this platform.
func ABI() int { return 0 }

func restrictAndExec(Policy, string, []string, []string) error {
	return errors.New("containment needs Linux")
}
