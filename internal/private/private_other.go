//go:build !unix

package private

import "log/slog"

// keep does nothing where files have no Unix modes and owners.
func keep(string, string, *slog.Logger) error { return nil }
