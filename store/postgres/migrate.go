package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store/internal/schema"
)

// migrations are the schema changes, applied in order of their numeric
// prefix ("0001_init.sql"; see schema.Migration). They are numbered on
// their own, not with store/sqlite's.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrate brings the schema up to date in one transaction, or fails with
// ErrNoLedger when there is none and existingOnly is set. Why one
// transaction under an advisory lock: several processes opening a new
// database at once must not both apply a migration (nor both create the
// version table); the others wait for the lock, then see the first one's
// versions and apply nothing. DDL is transactional in PostgreSQL, so a
// migration that fails leaves nothing behind.
func migrate(ctx context.Context, pool *pgxpool.Pool, existingOnly bool) error {
	ms, err := schema.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('drover_migrations') IS NOT NULL`).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if existingOnly {
				return ErrNoLedger
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE drover_migrations (
				version    integer     NOT NULL PRIMARY KEY,
				name       text        NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now()
			)`); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
		}
		var cur int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM drover_migrations`).Scan(&cur); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return schema.Apply(ms, cur, func(m schema.Migration) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil { // several statements: the simple protocol
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO drover_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
	})
}
