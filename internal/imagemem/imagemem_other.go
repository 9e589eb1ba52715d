//go:build !linux

package imagemem

// Release does nothing on this system: it returns 0 and no error.
func Release() (int64, error) { return 0, nil }
