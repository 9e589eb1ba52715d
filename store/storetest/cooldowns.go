package storetest

import (
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// testCooldowns: a ledger that shares failover cooldowns
// (engine.CooldownStore) tells how long a key has left, keeps the longer
// of two cooldowns, and forgets one that has ended.
func testCooldowns(t *testing.T, s store.Store) {
	cs, ok := s.(engine.CooldownStore)
	if !ok {
		t.Skipf("%T does not share failover cooldowns (engine.CooldownStore)", s)
	}
	ctx := t.Context()
	left := func(key string) (time.Duration, drover.ErrorCode) {
		t.Helper()
		d, code, err := cs.CooldownLeft(ctx, key)
		if err != nil {
			t.Fatalf("CooldownLeft(%s): %v", key, err)
		}
		return d, code
	}
	cool := func(key string, code drover.ErrorCode, d time.Duration) {
		t.Helper()
		if err := cs.CoolDown(ctx, key, code, d); err != nil {
			t.Fatalf("CoolDown(%s, %s, %s): %v", key, code, d, err)
		}
	}
	if d, code := left("profile:a"); d != 0 || code != "" {
		t.Errorf("unknown key: %s %q, want 0", d, code)
	}
	cool("profile:a", drover.CodeAuthFailed, 15*time.Minute)
	if d, code := left("profile:a"); d <= 14*time.Minute || d > 15*time.Minute || code != drover.CodeAuthFailed {
		t.Errorf("after a 15 min cooldown: %s %q", d, code)
	}
	cool("profile:a", drover.CodeRateLimited, time.Minute) // shorter: kept as it was
	if d, code := left("profile:a"); d <= 14*time.Minute || code != drover.CodeAuthFailed {
		t.Errorf("a shorter cooldown replaced a longer one: %s %q", d, code)
	}
	cool("profile:b|x|m", drover.CodeRateLimited, 50*time.Millisecond)
	cool("profile:b|x|m", drover.CodeOverloaded, 100*time.Millisecond) // longer: replaces
	if d, code := left("profile:b|x|m"); d <= 50*time.Millisecond || code != drover.CodeOverloaded {
		t.Errorf("a longer cooldown was not kept: %s %q", d, code)
	}
	time.Sleep(150 * time.Millisecond)
	if d, code := left("profile:b|x|m"); d != 0 || code != "" {
		t.Errorf("an ended cooldown: %s %q, want 0", d, code)
	}
	cool("profile:b|x|m", drover.CodeServerError, time.Second) // after the end: a new one
	if d, code := left("profile:b|x|m"); d <= 0 || code != drover.CodeServerError {
		t.Errorf("a cooldown after one ended: %s %q", d, code)
	}
}
