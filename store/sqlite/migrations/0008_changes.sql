-- 0008: a run's change to a git repository (WS-2) and the decisions taken
-- about it (WS-3), one changes row per run (store.Change) and one
-- change_decisions row per decision, n counting them from 1 in the order
-- they were taken. Times are Unix nanoseconds (UTC), as in 0001.
--
-- files is a JSON array of the changed files (store.ChangeFile: path,
-- from, kind, added, removed, binary), '[]' for none; check_result the
-- JSON of the check command's result (store.ChangeCheck: command, passed,
-- exitCode, output, durationMs), NULL when the change was not checked.
-- commit_id is the commit on branch that holds the change. patch is the
-- change as git apply takes it, '' when over the ledger's limit
-- (truncated = 1). Plain SQL reads them all, e.g.
--
--	SELECT f.value ->> 'path', f.value ->> 'added', f.value ->> 'removed'
--	FROM changes, json_each(changes.files) f WHERE run_id = ?;
--	SELECT n, action, decided_by, at, detail FROM change_decisions
--	WHERE run_id = ? ORDER BY n;
CREATE TABLE changes (
	run_id       TEXT    NOT NULL PRIMARY KEY REFERENCES runs (id),
	repo         TEXT    NOT NULL,
	base         TEXT    NOT NULL DEFAULT '',
	branch       TEXT    NOT NULL DEFAULT '',
	workspace    TEXT    NOT NULL DEFAULT '',
	commit_id    TEXT    NOT NULL DEFAULT '',
	start        TEXT    NOT NULL DEFAULT '',
	files        TEXT    NOT NULL DEFAULT '[]',
	patch        TEXT    NOT NULL DEFAULT '',
	truncated    INTEGER NOT NULL DEFAULT 0,
	check_result TEXT,
	state        TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL
) STRICT;

-- ListChanges is newest updated_at first: all of them, or those in some
-- states (the pending ones, say).
CREATE INDEX changes_updated ON changes (updated_at, run_id);
CREATE INDEX changes_state   ON changes (state, updated_at, run_id);

CREATE TABLE change_decisions (
	run_id     TEXT    NOT NULL REFERENCES changes (run_id),
	n          INTEGER NOT NULL,
	action     TEXT    NOT NULL,
	decided_by TEXT    NOT NULL DEFAULT '',
	at         INTEGER NOT NULL,
	detail     TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, n)
) STRICT;
