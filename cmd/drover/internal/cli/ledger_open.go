package cli

import (
	"context"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// openLedger opens the SQLite ledger at path (created if missing).
func openLedger(ctx context.Context, path string) (store.Store, error) {
	return sqlite.Open(ctx, path)
}
