-- 0008: how many of a run's permission requests were allowed and how many
-- of its tool calls were denied (by a person, a rule, the deadline or the
-- vendor), written with the run's end, as SQLite's 0009.
ALTER TABLE runs ADD COLUMN allowed integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN denied integer NOT NULL DEFAULT 0;
