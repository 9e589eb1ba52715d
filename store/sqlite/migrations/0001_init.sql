-- 0001: the ledger's first schema. Times are Unix nanoseconds (UTC), NULL
-- when unset; durations are nanoseconds (timeout) or milliseconds
-- (duration_ms). Optional usage fields are NULL when the vendor did not
-- report them: never an invented zero.

CREATE TABLE runs (
	id                 TEXT    NOT NULL PRIMARY KEY,
	agent              TEXT    NOT NULL,
	prompt             TEXT    NOT NULL,
	status             TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
	error              TEXT    NOT NULL DEFAULT '',
	parent_id          TEXT    NOT NULL DEFAULT '',
	session_id         TEXT    NOT NULL DEFAULT '',
	resume_token       TEXT    NOT NULL DEFAULT '',
	options            TEXT,
	timeout_ns         INTEGER NOT NULL DEFAULT 0,
	owner              TEXT    NOT NULL DEFAULT '',
	pid                INTEGER NOT NULL DEFAULT 0,
	pgid               INTEGER NOT NULL DEFAULT 0,
	created_at         INTEGER NOT NULL,
	started_at         INTEGER,
	ended_at           INTEGER,
	done_status        TEXT    NOT NULL DEFAULT '',
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	tool_uses          INTEGER NOT NULL DEFAULT 0,
	total_cost_usd     REAL,
	cache_read_tokens  INTEGER,
	cache_write_tokens INTEGER,
	reasoning_tokens   INTEGER,
	turns              INTEGER,
	duration_ms        INTEGER NOT NULL DEFAULT 0,
	cancel_requested   INTEGER NOT NULL DEFAULT 0
) STRICT;

-- ListRuns is newest first; each filter has an index that also yields that
-- order. The status index serves Unfinished too; the parent index Children.
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX runs_status  ON runs (status, created_at);
CREATE INDEX runs_agent   ON runs (agent, created_at);
CREATE INDEX runs_session ON runs (session_id, created_at) WHERE session_id <> '';
CREATE INDEX runs_parent  ON runs (parent_id, created_at) WHERE parent_id <> '';

-- Events: a rowid table, so appending writes the table's last page
-- whichever runs the events belong to (a table clustered by (run_id, seq)
-- would dirty one page per run per commit, and measured 1.3-1.9x slower to
-- write); the primary key's index serves Events(runID, afterSeq) as one
-- range scan and a run's last seq as one seek (runs keeps no copy of it,
-- so appending events writes no runs page), and rejects a duplicate seq.
-- The foreign key is checked at commit (DEFERRED) and events are inserted
-- OR FAIL: then a multi-row INSERT cannot abort half way, and SQLite skips
-- the statement journal it would otherwise write for it.
CREATE TABLE events (
	run_id TEXT    NOT NULL REFERENCES runs (id) DEFERRABLE INITIALLY DEFERRED,
	seq    INTEGER NOT NULL,
	type   TEXT    NOT NULL,
	json   TEXT    NOT NULL,
	time   INTEGER,
	PRIMARY KEY (run_id, seq)
) STRICT;

CREATE TABLE messages (
	run_id      TEXT    NOT NULL REFERENCES runs (id),
	idx         INTEGER NOT NULL,
	role        TEXT    NOT NULL,
	content     TEXT    NOT NULL,
	tool_use_id TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, idx)
) STRICT;

-- ord keeps the order FinishRun was given; ToolCalls returns it.
CREATE TABLE tool_calls (
	run_id     TEXT    NOT NULL REFERENCES runs (id),
	ord        INTEGER NOT NULL,
	id         TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	input      TEXT,
	status     TEXT    NOT NULL DEFAULT '',
	output     TEXT    NOT NULL DEFAULT '',
	started_at INTEGER,
	ended_at   INTEGER,
	PRIMARY KEY (run_id, ord)
) STRICT;

-- heads is a JSON array of the session's former head run ids, oldest first.
CREATE TABLE sessions (
	id           TEXT    NOT NULL PRIMARY KEY,
	agent        TEXT    NOT NULL,
	resume_token TEXT    NOT NULL DEFAULT '',
	head_run_id  TEXT    NOT NULL DEFAULT '',
	heads        TEXT    NOT NULL DEFAULT '[]',
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_updated ON sessions (updated_at);
