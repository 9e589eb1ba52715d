-- 0005: failover cooldowns shared by every drover process on the database
-- (FAIL-1): a credential one worker found rate limited is skipped by all
-- of them until it has cooled down. A key names a profile, agent and
-- model (drover.Cooldowns), never a secret. until_at is the server's
-- clock, so the workers' clocks need not agree; a row whose until_at has
-- passed means nothing and is overwritten by the next cooldown of its key.
CREATE TABLE cooldowns (
	key      text        NOT NULL PRIMARY KEY,
	code     text        NOT NULL,
	until_at timestamptz NOT NULL
);
