package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
)

var _ engine.CooldownStore = (*Store)(nil)

// CoolDown records that key cools down for d from now, by the server's
// clock; a cooldown of key that ends later is kept (engine.CooldownStore).
func (s *Store) CoolDown(ctx context.Context, key string, code drover.ErrorCode, d time.Duration) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO cooldowns (key, code, until_at)
		VALUES ($1, $2, now() + make_interval(secs => $3::float8 / 1000))
		ON CONFLICT (key) DO UPDATE SET code = excluded.code, until_at = excluded.until_at
		WHERE cooldowns.until_at < excluded.until_at`,
		key, string(code), float64(d.Milliseconds()))
	return err
}

// CooldownLeft returns how long key has left to cool, by the server's
// clock, and the failure that started it; zero when it is not cooling
// (engine.CooldownStore).
func (s *Store) CooldownLeft(ctx context.Context, key string) (time.Duration, drover.ErrorCode, error) {
	var (
		ms   float64
		code string
	)
	err := s.pool.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM until_at - now()) * 1000, code
		FROM cooldowns WHERE key = $1 AND until_at > now()`, key).Scan(&ms, &code)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	return time.Duration(ms * float64(time.Millisecond)), drover.ErrorCode(code), nil
}
