package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/drover-run/drover"
)

// CooldownFor is how long a profile cools down after a failure with code
// when the vendor gave no retry-after: a rate limit a minute, an overload
// 30 s, a server error 15 s, refused credentials 15 minutes (a key that
// was refused is unlikely to work again soon).
func CooldownFor(code drover.ErrorCode) time.Duration {
	switch code {
	case drover.CodeRateLimited:
		return time.Minute
	case drover.CodeOverloaded:
		return 30 * time.Second
	case drover.CodeServerError:
		return 15 * time.Second
	case drover.CodeAuthFailed:
		return 15 * time.Minute
	}
	return 0
}

// Cooldowns is the registry of cooling credentials that the failover of
// every run of one Engine shares: what one run found rate limited, the
// next run skips until it has cooled down. Shared through a CooldownStore
// (Share), it is also what the other processes on that store found. It is
// safe for concurrent use.
type Cooldowns struct {
	mu     sync.Mutex
	until  map[string]cooldown
	now    func() time.Time
	shared CooldownStore
	report func(error)
}

type cooldown struct {
	until time.Time
	code  drover.ErrorCode
}

// CooldownStore keeps cooldowns where several processes see them: every
// worker on one PostgreSQL ledger skips the credentials any of them found
// rate limited. Durations, not instants, cross it, so machines whose
// clocks disagree still agree on how long is left. Keys name a profile,
// agent and model, never a secret. store/sqlite and store/postgres
// implement it.
type CooldownStore interface {
	// CoolDown records that key cools down for d after a failure with
	// code; a cooldown already recorded that ends later is kept.
	CoolDown(ctx context.Context, key string, code drover.ErrorCode, d time.Duration) error
	// CooldownLeft returns how long key has left to cool and the failure
	// that started it; zero when key is not cooling.
	CooldownLeft(ctx context.Context, key string) (time.Duration, drover.ErrorCode, error)
}

// sharedTimeout bounds one CooldownStore call: a ledger that does not
// answer must not hold up a run's failover, which then goes on with what
// this process knows.
const sharedTimeout = 2 * time.Second

// NewCooldowns returns an empty registry.
func NewCooldowns() *Cooldowns {
	return &Cooldowns{until: map[string]cooldown{}, now: time.Now}
}

// Share makes c write every cooldown through to s and consult s for keys
// it does not know to be cooling. A call to s that fails (report is told,
// when not nil) leaves c working on what this process knows: a shared
// ledger being down never fails a run.
func (c *Cooldowns) Share(s CooldownStore, report func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shared, c.report = s, report
}

func (c *Cooldowns) sharing() (CooldownStore, func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	report := c.report
	if report == nil {
		report = func(error) {}
	}
	return c.shared, report
}

// Cool marks key as cooling for d after a failure with code; a longer
// cooldown already set is kept.
func (c *Cooldowns) Cool(key string, code drover.ErrorCode, d time.Duration) {
	c.coolLocal(key, cooldown{until: c.now().Add(d), code: code})
	if s, report := c.sharing(); s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		if err := s.CoolDown(ctx, key, code, d); err != nil {
			report(fmt.Errorf("failover: share cooldown of %s: %w", key, err))
		}
	}
}

func (c *Cooldowns) coolLocal(key string, cd cooldown) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.until[key]; ok && cur.until.After(cd.until) {
		return
	}
	c.until[key] = cd
}

// Until returns when key's cooldown ends and the failure that started it;
// a zero time when key is not cooling.
func (c *Cooldowns) Until(key string) (time.Time, drover.ErrorCode) {
	if t, code := c.untilLocal(key); !t.IsZero() {
		return t, code
	}
	s, report := c.sharing()
	if s == nil {
		return time.Time{}, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	left, code, err := s.CooldownLeft(ctx, key)
	if err != nil {
		report(fmt.Errorf("failover: read shared cooldown of %s: %w", key, err))
		return time.Time{}, ""
	}
	if left <= 0 {
		return time.Time{}, ""
	}
	// Held here until it ends: what another process started is not asked
	// for again by every pick of this one.
	cd := cooldown{until: c.now().Add(left), code: code}
	c.coolLocal(key, cd)
	return cd.until, cd.code
}

func (c *Cooldowns) untilLocal(key string) (time.Time, drover.ErrorCode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cd, ok := c.until[key]
	if !ok {
		return time.Time{}, ""
	}
	if !cd.until.After(c.now()) {
		delete(c.until, key)
		return time.Time{}, ""
	}
	return cd.until, cd.code
}

// Cooldowns returns the engine's cooldown registry, shared by the
// failover of all its runs (one engine serves a drover process).
func (e *Engine) Cooldowns() *Cooldowns {
	e.coolOnce.Do(func() {
		if e.cool == nil {
			e.cool = NewCooldowns()
		}
	})
	return e.cool
}
