-- 0007: a run's change to a git repository (WS-2) and the decisions taken
-- about it (WS-3), as SQLite's 0008_changes.sql: one changes row per run
-- (store.Change) and one change_decisions row per decision, n counting
-- them from 1 in the order they were taken.
--
-- files is a jsonb array of the changed files (store.ChangeFile: path,
-- from, kind, added, removed, binary), '[]' for none; check_result the
-- json of the check command's result (store.ChangeCheck: command, passed,
-- exitCode, output, durationMs), NULL when the change was not checked
-- (json, not jsonb: a command's output may hold a NUL, which jsonb
-- refuses). commit_id is the commit on branch that holds the change.
-- patch is the change as git apply takes it, byte for byte (bytea: a text
-- file need not be UTF-8, and git diffs it as text), empty when over the
-- ledger's limit (truncated). Plain SQL reads them all, e.g.
--
--	SELECT f ->> 'path', f ->> 'added', f ->> 'removed'
--	FROM changes, jsonb_array_elements(files) f WHERE run_id = $1;
--	SELECT n, action, decided_by, at, detail FROM change_decisions
--	WHERE run_id = $1 ORDER BY n;
--	SELECT convert_from(patch, 'UTF8') FROM changes WHERE run_id = $1;
CREATE TABLE changes (
	run_id       text        NOT NULL PRIMARY KEY REFERENCES runs (id),
	repo         text        NOT NULL,
	base         text        NOT NULL DEFAULT '',
	branch       text        NOT NULL DEFAULT '',
	workspace    text        NOT NULL DEFAULT '',
	commit_id    text        NOT NULL DEFAULT '',
	start        text        NOT NULL DEFAULT '',
	files        jsonb       NOT NULL DEFAULT '[]',
	patch        bytea       NOT NULL DEFAULT '',
	truncated    boolean     NOT NULL DEFAULT false,
	check_result json,
	state        text        NOT NULL,
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL
);

-- ListChanges is newest updated_at first: all of them, or those in some
-- states (the pending ones, say).
CREATE INDEX changes_updated ON changes (updated_at, run_id);
CREATE INDEX changes_state   ON changes (state, updated_at, run_id);

CREATE TABLE change_decisions (
	run_id     text        NOT NULL REFERENCES changes (run_id),
	n          integer     NOT NULL,
	action     text        NOT NULL,
	decided_by text        NOT NULL DEFAULT '',
	at         timestamptz NOT NULL,
	detail     text        NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, n)
);
