-- 0009: how many of a run's permission requests were allowed and how many
-- of its tool calls were denied (by a person, a rule, the deadline or the
-- vendor), written with the run's end, so a summary line and `drover ps`
-- can say "3 tool calls, 2 denied" without reading the run's events.
ALTER TABLE runs ADD COLUMN allowed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN denied INTEGER NOT NULL DEFAULT 0;
