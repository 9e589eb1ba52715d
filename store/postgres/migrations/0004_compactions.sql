-- compactions: every context compaction a vendor reported, automatic or
-- asked for (UES-5, FAIL-1), one row per compaction, by drover session.
-- A view over the recorded events (an extension event VENDOR:compact…),
-- as in SQLite's 0005_compactions.sql. Claude Code reports the token
-- counts before and after (compact_metadata); NULL where a vendor does not.
CREATE VIEW compactions AS
SELECT
	e.j ->> 'sessionId'                                        AS session_id,
	e.run_id,
	e.seq,
	e.j ->> 'agent'                                            AS agent,
	(e.j ->> 'timestamp')::bigint                              AS at_ms,
	e.j -> 'payload' -> 'compact_metadata' ->> 'trigger'       AS trigger,
	(e.j -> 'payload' -> 'compact_metadata' ->> 'pre_tokens')::bigint  AS tokens_before,
	(e.j -> 'payload' -> 'compact_metadata' ->> 'post_tokens')::bigint AS tokens_after
FROM (SELECT run_id, seq, convert_from(data, 'UTF8')::jsonb AS j FROM events WHERE type LIKE '%:compact%') AS e;
