package postgres_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// LED-6: the PostgreSQL ledger passes the shared contract suite, each
// test in a database of its own.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), pgtest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
