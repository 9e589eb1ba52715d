package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-run/drover/store/postgres"
)

// Stats is what the shared queue and its workers look like now (OBS-2:
// drover worker's drover_queue_depth and drover_workers_live).
type Stats struct {
	// Queued is how many queued runs no worker has claimed yet: pending
	// and owned by nobody (what ClaimRun takes).
	Queued int
	// Live is how many workers are live as `drover workers` says it:
	// neither stopped nor lost, and heartbeating within their lease.
	Live int
}

// ReadStats reads Stats from st's database in one query (both counts
// come from small partial indexes or the workers table).
func ReadStats(ctx context.Context, st *postgres.Store) (Stats, error) {
	var s Stats
	err := st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM runs WHERE status = 'pending' AND owner = ''),
		(SELECT count(*) FROM workers WHERE stopped_at IS NULL AND lost_at IS NULL
			AND heartbeat_at + lease_ms * interval '1 millisecond' >= $1)`, time.Now()).Scan(&s.Queued, &s.Live)
	if err != nil {
		return Stats{}, fmt.Errorf("queue stats: %w", err)
	}
	return s, nil
}
