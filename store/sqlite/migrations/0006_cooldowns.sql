-- 0006: failover cooldowns shared by every drover process on this ledger
-- (FAIL-1), as PostgreSQL's 0005_cooldowns.sql shares them among workers:
-- a credential one `drover run` found rate limited is skipped by the
-- others until it has cooled down. A key names a profile, agent and model
-- (drover.Cooldowns), never a secret. until_ms is Unix milliseconds; a row
-- whose time has passed means nothing and is overwritten by the next
-- cooldown of its key.
CREATE TABLE cooldowns (
	key      TEXT    NOT NULL PRIMARY KEY,
	code     TEXT    NOT NULL,
	until_ms INTEGER NOT NULL
) STRICT;
