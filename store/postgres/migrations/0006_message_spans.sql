-- 0006: a message reference in turn_refs may stand for several messages
-- ([index, seq, n]: n consecutive messages read from n consecutive
-- events, store.Message.Span), so that a long streamed turn's record is
-- one entry, not one per text. run_messages reads both forms (as
-- SQLite's 0007_message_spans.sql).
CREATE OR REPLACE VIEW run_messages (run_id, idx, role, content, tool_use_id, seq) AS
	SELECT run_id, idx, role, content, tool_use_id, NULL::bigint FROM messages
	UNION ALL
	SELECT r.run_id, (j.value ->> 0)::integer + (e.seq - (j.value ->> 1)::bigint)::integer,
		CASE e.type WHEN 'text' THEN 'assistant' WHEN 'tool_result' THEN 'tool' WHEN 'drover:steer' THEN 'user' END,
		COALESCE(CASE e.type
			WHEN 'text' THEN ep.p ->> 'content'
			WHEN 'tool_result' THEN ep.p ->> 'output'
			WHEN 'drover:steer' THEN ep.p ->> 'message' END, ''),
		CASE e.type WHEN 'tool_result' THEN COALESCE(ep.p ->> 'toolUseId', '') ELSE '' END,
		e.seq
	FROM turn_refs r
	CROSS JOIN LATERAL json_array_elements(r.messages) j (value)
	JOIN events e ON e.run_id = r.run_id
		AND e.seq BETWEEN (j.value ->> 1)::bigint AND (j.value ->> 1)::bigint + COALESCE((j.value ->> 2)::bigint, 1) - 1
	CROSS JOIN LATERAL (SELECT convert_from(e.data, 'UTF8')::json -> 'payload') ep (p);
