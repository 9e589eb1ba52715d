package runs_test

import (
	"context"
	"testing"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// openStore opens a real SQLite ledger file, closed when the test ends.
func openStore(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type sqliteWriter = sqlite.Writer

// openStoreB opens a real SQLite ledger file for a benchmark.
func openStoreB(b *testing.B, path string) store.Store {
	b.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
