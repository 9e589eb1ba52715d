package cli

import (
	"context"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// ledger is an open ledger: the store, its batched event writer, and how to
// close both.
type ledger struct {
	st          store.Store
	append      func(context.Context, store.Event) error
	appendAsync func(store.Event) <-chan error
	close       func() error
}

// openLedger opens the SQLite ledger at path (created if missing).
func openLedger(ctx context.Context, path string) (*ledger, error) {
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	w := s.Writer()
	return &ledger{st: s, append: w.Append, appendAsync: w.AppendAsync, close: s.Close}, nil
}
