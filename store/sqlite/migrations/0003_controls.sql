-- 0003: control messages (CTL-1, CTL-3): answers to permission requests,
-- steering messages and interrupts that a process posts for a run another
-- process owns. The owner takes them (and deletes them) as it polls, the
-- way it reads cancel_requested.
CREATE TABLE controls (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id     TEXT NOT NULL REFERENCES runs (id),
	kind       TEXT NOT NULL,
	payload    TEXT,
	by         TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX controls_run ON controls (run_id, id);
