-- 0002: the turn record by reference (LED-3). A message or tool call whose
-- content is in the run's events (store.Message.Seq, store.ToolCall.Seq and
-- ResultSeq) is kept as the seqs of those events rather than as a copy:
-- copying every text and tool output of a run into messages and tool_calls
-- rows at its end cost about as much as recording the events themselves.
-- One row per run holds them all, as JSON arrays (see turn.go): one row,
-- not thousands, is what keeps FinishRun cheap. Entries without a
-- reference stay in messages and tool_calls.
CREATE TABLE turn_refs (
	run_id     TEXT NOT NULL PRIMARY KEY REFERENCES runs (id),
	messages   TEXT NOT NULL DEFAULT '[]',
	tool_calls TEXT NOT NULL DEFAULT '[]'
) STRICT;
