-- 0005: the turn record for plain SQL (LED-3). Since 0002 most of a run's
-- messages and tool calls are kept as references to its events (turn_refs),
-- so the messages and tool_calls tables hold only the entries given
-- without one. run_messages and run_tool_calls are the whole turn record,
-- both kinds, with the content read from the events exactly as
-- Store.Messages and Store.ToolCalls read it: what someone who opens the
-- ledger with sqlite3 queries. seq is the event a row was read from (NULL
-- for a row stored as given); times are Unix nanoseconds.
CREATE VIEW run_messages (run_id, idx, role, content, tool_use_id, seq) AS
	SELECT run_id, idx, role, content, tool_use_id, NULL FROM messages
	UNION ALL
	SELECT r.run_id, j.value ->> '$[0]',
		CASE e.type WHEN 'text' THEN 'assistant' WHEN 'tool_result' THEN 'tool' WHEN 'drover:steer' THEN 'user' END,
		COALESCE(CASE e.type
			WHEN 'text' THEN e.json ->> '$.payload.content'
			WHEN 'tool_result' THEN e.json ->> '$.payload.output'
			WHEN 'drover:steer' THEN e.json ->> '$.payload.message' END, ''),
		CASE e.type WHEN 'tool_result' THEN COALESCE(e.json ->> '$.payload.toolUseId', '') ELSE '' END,
		e.seq
	FROM turn_refs r, json_each(r.messages) j
	JOIN events e ON e.run_id = r.run_id AND e.seq = j.value ->> '$[1]';

CREATE VIEW run_tool_calls (run_id, ord, id, name, input, status, output, started_at, ended_at, seq, result_seq) AS
	SELECT run_id, ord, id, name, input, status, output, started_at, ended_at, NULL, NULL FROM tool_calls
	UNION ALL
	SELECT r.run_id, j.value ->> '$.ord',
		COALESCE(u.json ->> '$.payload.toolUseId', j.value ->> '$.id', ''),
		COALESCE(u.json ->> '$.payload.toolName', j.value ->> '$.name', ''),
		CASE WHEN u.seq IS NOT NULL THEN u.json -> '$.payload.input' ELSE j.value -> '$.input' END,
		COALESCE(o.json ->> '$.payload.status', j.value ->> '$.status', ''),
		COALESCE(o.json ->> '$.payload.output', j.value ->> '$.output', ''),
		CASE WHEN u.seq IS NOT NULL THEN u.time ELSE NULLIF(j.value ->> '$.startedAt', 0) END,
		CASE WHEN o.seq IS NOT NULL THEN o.time ELSE NULLIF(j.value ->> '$.endedAt', 0) END,
		u.seq, o.seq
	FROM turn_refs r, json_each(r.tool_calls) j
	LEFT JOIN events u ON u.run_id = r.run_id AND u.seq = j.value ->> '$.seq'
	LEFT JOIN events o ON o.run_id = r.run_id AND o.seq = j.value ->> '$.resultSeq';
