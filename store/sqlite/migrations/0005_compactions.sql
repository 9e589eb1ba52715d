-- compactions: every context compaction a vendor reported, automatic or
-- asked for (UES-5, FAIL-1), one row per compaction, by drover session.
-- A view over the recorded events (an extension event VENDOR:compact…),
-- so nothing records it twice and a ledger written before this
-- migration shows its old compactions too. Claude Code reports the token
-- counts before and after (compact_metadata); NULL where a vendor does not.
CREATE VIEW compactions AS
SELECT
	json_extract(json, '$.sessionId')                         AS session_id,
	run_id,
	seq,
	json_extract(json, '$.agent')                             AS agent,
	json_extract(json, '$.timestamp')                         AS at_ms,
	json_extract(json, '$.payload.compact_metadata.trigger')     AS trigger,
	json_extract(json, '$.payload.compact_metadata.pre_tokens')  AS tokens_before,
	json_extract(json, '$.payload.compact_metadata.post_tokens') AS tokens_after
FROM events
WHERE type LIKE '%:compact%';
