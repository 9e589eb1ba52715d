-- 0001: drover's PostgreSQL ledger, the schema of store/sqlite's
-- migrations 0001-0003 in PostgreSQL's terms. Times are timestamptz
-- (microseconds), NULL when unset; durations are nanoseconds (timeout_ns)
-- or milliseconds (duration_ms). Optional usage fields are NULL when the
-- vendor did not report them: never an invented zero. JSON the ledger
-- does not look into is json, which keeps its text as given; event JSON is
-- bytea, stored and returned byte for byte whatever it holds
-- (convert_from(data, 'UTF8')::jsonb to query it).

-- n is the order of insertion: it breaks ties of created_at, as SQLite's
-- rowid does.
CREATE TABLE runs (
	n                  bigint           GENERATED ALWAYS AS IDENTITY,
	id                 text             NOT NULL PRIMARY KEY,
	agent              text             NOT NULL,
	prompt             text             NOT NULL,
	status             text             NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
	error              text             NOT NULL DEFAULT '',
	parent_id          text             NOT NULL DEFAULT '',
	session_id         text             NOT NULL DEFAULT '',
	resume_token       text             NOT NULL DEFAULT '',
	options            json,
	timeout_ns         bigint           NOT NULL DEFAULT 0,
	owner              text             NOT NULL DEFAULT '',
	pid                integer          NOT NULL DEFAULT 0,
	pgid               integer          NOT NULL DEFAULT 0,
	created_at         timestamptz      NOT NULL,
	started_at         timestamptz,
	ended_at           timestamptz,
	done_status        text             NOT NULL DEFAULT '',
	input_tokens       bigint           NOT NULL DEFAULT 0,
	output_tokens      bigint           NOT NULL DEFAULT 0,
	tool_uses          bigint           NOT NULL DEFAULT 0,
	total_cost_usd     double precision,
	cache_read_tokens  bigint,
	cache_write_tokens bigint,
	reasoning_tokens   bigint,
	turns              bigint,
	duration_ms        bigint           NOT NULL DEFAULT 0,
	cancel_requested   boolean          NOT NULL DEFAULT false
);

-- ListRuns is newest first; each filter has an index that also yields that
-- order. The status index serves Unfinished too; the parent index Children.
CREATE INDEX runs_created ON runs (created_at, n);
CREATE INDEX runs_status  ON runs (status, created_at, n);
CREATE INDEX runs_agent   ON runs (agent, created_at, n);
CREATE INDEX runs_session ON runs (session_id, created_at, n) WHERE session_id <> '';
CREATE INDEX runs_parent  ON runs (parent_id, created_at, n) WHERE parent_id <> '';

-- Events. cursor is the ledger's commit order (store.EventsAfter): every
-- transaction that appends events first takes one advisory lock (see the
-- package doc), so the sequence hands out its numbers in commit order. The
-- sequence must not cache (CACHE 1): a cache hands each connection a range
-- of its own, out of order across connections.
-- run_id has no foreign key: appending checks each run exists (and reads
-- its last seq) under that lock, runs are never deleted, and a foreign key
-- would cost a locking lookup of the run per event.
CREATE TABLE events (
	cursor bigint      GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
	run_id text        NOT NULL,
	seq    bigint      NOT NULL,
	type   text        NOT NULL,
	data   bytea       NOT NULL,
	at     timestamptz,
	UNIQUE (run_id, seq)
);

CREATE TABLE messages (
	run_id      text    NOT NULL REFERENCES runs (id),
	idx         integer NOT NULL,
	role        text    NOT NULL,
	content     text    NOT NULL,
	tool_use_id text    NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, idx)
);

-- ord keeps the order FinishRun was given; ToolCalls returns it.
CREATE TABLE tool_calls (
	run_id     text        NOT NULL REFERENCES runs (id),
	ord        integer     NOT NULL,
	id         text        NOT NULL,
	name       text        NOT NULL,
	input      json,
	status     text        NOT NULL DEFAULT '',
	output     text        NOT NULL DEFAULT '',
	started_at timestamptz,
	ended_at   timestamptz,
	PRIMARY KEY (run_id, ord)
);

-- The turn record by reference (LED-3, package store/internal/turnref):
-- one row per run holds all of its references as two JSON arrays.
CREATE TABLE turn_refs (
	run_id     text NOT NULL PRIMARY KEY REFERENCES runs (id),
	messages   json NOT NULL,
	tool_calls json NOT NULL
);

-- heads are the session's former head run ids, oldest first.
CREATE TABLE sessions (
	n            bigint      GENERATED ALWAYS AS IDENTITY,
	id           text        NOT NULL PRIMARY KEY,
	agent        text        NOT NULL,
	resume_token text        NOT NULL DEFAULT '',
	head_run_id  text        NOT NULL DEFAULT '',
	heads        text[]      NOT NULL DEFAULT '{}',
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL
);

CREATE INDEX sessions_updated ON sessions (updated_at, n);

-- Control messages (CTL-1, CTL-3) a process posts for a run another
-- process owns; the owner takes (deletes) them as it polls.
CREATE TABLE controls (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	run_id     text        NOT NULL REFERENCES runs (id),
	kind       text        NOT NULL,
	payload    json,
	sent_by    text        NOT NULL DEFAULT '',
	created_at timestamptz NOT NULL
);
CREATE INDEX controls_run ON controls (run_id, id);
