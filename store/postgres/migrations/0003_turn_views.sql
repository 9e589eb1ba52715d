-- 0003: the turn record for plain SQL (LED-3). Most of a run's messages
-- and tool calls are kept as references to its events (turn_refs), so
-- the messages and tool_calls tables hold only the entries given without
-- one. run_messages and run_tool_calls are the whole turn record, both
-- kinds, with the content read from the events exactly as Store.Messages
-- and Store.ToolCalls read it: what someone who opens the ledger with psql
-- queries. seq is the event a row was read from (NULL for a row stored as
-- given).
CREATE VIEW run_messages (run_id, idx, role, content, tool_use_id, seq) AS
	SELECT run_id, idx, role, content, tool_use_id, NULL::bigint FROM messages
	UNION ALL
	SELECT r.run_id, (j.value ->> 0)::integer,
		CASE e.type WHEN 'text' THEN 'assistant' WHEN 'tool_result' THEN 'tool' WHEN 'drover:steer' THEN 'user' END,
		COALESCE(CASE e.type
			WHEN 'text' THEN ep.p ->> 'content'
			WHEN 'tool_result' THEN ep.p ->> 'output'
			WHEN 'drover:steer' THEN ep.p ->> 'message' END, ''),
		CASE e.type WHEN 'tool_result' THEN COALESCE(ep.p ->> 'toolUseId', '') ELSE '' END,
		e.seq
	FROM turn_refs r
	CROSS JOIN LATERAL json_array_elements(r.messages) j (value)
	JOIN events e ON e.run_id = r.run_id AND e.seq = (j.value ->> 1)::bigint
	CROSS JOIN LATERAL (SELECT convert_from(e.data, 'UTF8')::json -> 'payload') ep (p);

CREATE VIEW run_tool_calls (run_id, ord, id, name, input, status, output, started_at, ended_at, seq, result_seq) AS
	SELECT run_id, ord, id, name, input, status, output, started_at, ended_at, NULL::bigint, NULL::bigint FROM tool_calls
	UNION ALL
	SELECT r.run_id, (j.value ->> 'ord')::integer,
		COALESCE(x.up ->> 'toolUseId', j.value ->> 'id', ''),
		COALESCE(x.up ->> 'toolName', j.value ->> 'name', ''),
		CASE WHEN u.seq IS NOT NULL THEN x.up -> 'input' ELSE j.value -> 'input' END,
		COALESCE(x.op ->> 'status', j.value ->> 'status', ''),
		COALESCE(x.op ->> 'output', j.value ->> 'output', ''),
		CASE WHEN u.seq IS NOT NULL THEN u.at
			ELSE timestamptz 'epoch' + (NULLIF((j.value ->> 'startedAt')::bigint, 0) / 1000) * interval '1 microsecond' END,
		CASE WHEN o.seq IS NOT NULL THEN o.at
			ELSE timestamptz 'epoch' + (NULLIF((j.value ->> 'endedAt')::bigint, 0) / 1000) * interval '1 microsecond' END,
		u.seq, o.seq
	FROM turn_refs r
	CROSS JOIN LATERAL json_array_elements(r.tool_calls) j (value)
	LEFT JOIN events u ON u.run_id = r.run_id AND u.seq = (j.value ->> 'seq')::bigint
	LEFT JOIN events o ON o.run_id = r.run_id AND o.seq = (j.value ->> 'resultSeq')::bigint
	CROSS JOIN LATERAL (SELECT convert_from(u.data, 'UTF8')::json -> 'payload',
		convert_from(o.data, 'UTF8')::json -> 'payload') x (up, op);
