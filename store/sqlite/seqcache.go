package sqlite

import "sync"

// seqCache is the last seq of the runs this process's writer appended to,
// as of their last commit, so that a transaction need not read it back
// for every run of its batch: that read was a third of a transaction and
// the wait behind it most of drover serve's latency with 200 runs.
// It is set only after a commit, so it is never ahead of the
// ledger; it may be behind when another process (or AppendEvents, which
// forgets what it touches) appended to a run since, and then an event of
// that run looks like a gap or its insert hits the primary key, and the
// batch is checked again against the ledger (Store.writeBatch).
type seqCache struct {
	mu   sync.Mutex
	last map[string]int64
}

// lookup returns the cached last seqs of those of ids the cache has, in
// a map of the caller's.
func (c *seqCache) lookup(ids []string) map[string]int64 {
	last := make(map[string]int64, len(ids))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if seq, ok := c.last[id]; ok {
			last[id] = seq
		}
	}
	return last
}

// set records last, read or advanced by a transaction that committed.
func (c *seqCache) set(last map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = make(map[string]int64, len(last))
	}
	for id, seq := range last {
		c.last[id] = seq
	}
}

// forget drops ids: their next transaction reads them from the ledger.
func (c *seqCache) forget(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.last, id)
	}
}
