package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/drover-run/drover/store/internal/schema"
)

// migrations are the schema changes, applied in order of their numeric
// prefix ("0001_init.sql"; see schema.Migration).
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrate brings the schema up to date in one BEGIN IMMEDIATE transaction.
// Why one write transaction: two processes opening a new file at once must
// not both apply a migration. The second waits for the write lock, then
// sees the first one's versions and applies nothing.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := schema.Load(migrations, "migrations")
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = schema.Apply(ms, cur, func(m schema.Migration) error {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UnixNano())
		return err
	})
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
