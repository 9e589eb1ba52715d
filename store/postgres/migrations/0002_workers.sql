-- 0002: drover workers (docs/scale-out.md). A worker is a `drover worker`
-- process that claims queued runs; it owns the runs it claimed under the
-- owner name 'worker:' || id, and proves it is alive by moving
-- heartbeat_at forward at least once per lease. A worker whose heartbeat
-- is older than its lease (plus a grace) is lost: its runs are failed
-- "worker lost" by whichever live worker notices first (lost_at set once).
CREATE TABLE workers (
	id           text        NOT NULL PRIMARY KEY,
	host         text        NOT NULL,
	pid          integer     NOT NULL,
	agents       text[]      NOT NULL,
	labels       text[]      NOT NULL,
	lease_ms     bigint      NOT NULL,
	started_at   timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL,
	stopped_at   timestamptz,
	lost_at      timestamptz
);

-- The runs a worker owns, while they are unfinished (claims and the reaper).
CREATE INDEX runs_owner_unfinished ON runs (owner) WHERE status IN ('pending', 'running');
