package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
)

var _ engine.CooldownStore = (*Store)(nil)

// CoolDown records that key cools down for d from now; a cooldown of key
// that ends later is kept (engine.CooldownStore).
func (s *Store) CoolDown(ctx context.Context, key string, code drover.ErrorCode, d time.Duration) error {
	until := time.Now().Add(d).UnixMilli()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cooldowns (key, code, until_ms) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET code = excluded.code, until_ms = excluded.until_ms
			WHERE cooldowns.until_ms < excluded.until_ms`, key, string(code), until)
		return err
	})
}

// CooldownLeft returns how long key has left to cool and the failure that
// started it; zero when it is not cooling (engine.CooldownStore).
func (s *Store) CooldownLeft(ctx context.Context, key string) (time.Duration, drover.ErrorCode, error) {
	now := time.Now()
	var (
		until int64
		code  string
	)
	err := s.r.QueryRowContext(ctx, `SELECT until_ms, code FROM cooldowns WHERE key = ? AND until_ms > ?`,
		key, now.UnixMilli()).Scan(&until, &code)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	return time.UnixMilli(until).Sub(now), drover.ErrorCode(code), nil
}
