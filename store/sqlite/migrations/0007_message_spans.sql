-- 0007: a message reference in turn_refs may stand for several messages
-- ([index, seq, n]: n consecutive messages read from n consecutive
-- events, store.Message.Span), so that a long streamed turn's record is
-- one entry, not one per text. run_messages reads both forms.
DROP VIEW run_messages;
CREATE VIEW run_messages (run_id, idx, role, content, tool_use_id, seq) AS
	SELECT run_id, idx, role, content, tool_use_id, NULL FROM messages
	UNION ALL
	SELECT r.run_id, (j.value ->> '$[0]') + (e.seq - (j.value ->> '$[1]')),
		CASE e.type WHEN 'text' THEN 'assistant' WHEN 'tool_result' THEN 'tool' WHEN 'drover:steer' THEN 'user' END,
		COALESCE(CASE e.type
			WHEN 'text' THEN e.json ->> '$.payload.content'
			WHEN 'tool_result' THEN e.json ->> '$.payload.output'
			WHEN 'drover:steer' THEN e.json ->> '$.payload.message' END, ''),
		CASE e.type WHEN 'tool_result' THEN COALESCE(e.json ->> '$.payload.toolUseId', '') ELSE '' END,
		e.seq
	FROM turn_refs r, json_each(r.messages) j
	JOIN events e ON e.run_id = r.run_id
		AND e.seq BETWEEN (j.value ->> '$[1]') AND (j.value ->> '$[1]') + COALESCE(j.value ->> '$[2]', 1) - 1;
