package cli

import (
	"context"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// ledger is an open ledger: the store, its batched event writer, and how to
// close both.
type ledger struct {
	st     store.Store
	append func(context.Context, store.Event) error
	close  func() error
}

// openLedger opens the SQLite ledger at path (created if missing).
func openLedger(ctx context.Context, path string) (*ledger, error) {
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return &ledger{st: s, append: s.Writer().Append, close: s.Close}, nil
}
