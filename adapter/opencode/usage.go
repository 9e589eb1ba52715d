package opencode

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, for OpenCode's session database

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// addStep adds one model call's usage to u: OpenCode reports tokens and
// cost per step (a step_finish line headless, a step-finish part in its
// session database), so a run's usage is their sum.
func addStep(u *drover.Usage, tk *tokens, cost *float64) {
	if cost != nil {
		c := *cost
		if u.TotalCostUSD != nil {
			c += *u.TotalCostUSD
		}
		u.TotalCostUSD = &c
	}
	if tk == nil {
		return
	}
	u.InputTokens += tk.Input
	u.OutputTokens += tk.Output
	runner.AddOptional(&u.ReasoningTokens, tk.Reasoning)
	if tk.Cache != nil {
		runner.AddOptional(&u.CacheReadTokens, tk.Cache.Read)
		runner.AddOptional(&u.CacheWriteTokens, tk.Cache.Write)
	}
}

// sessionDB is the session database of the OpenCode that runs with
// environment env, as OpenCode 1.18.33 finds it: $OPENCODE_DB (absolute,
// or relative to its data directory; ":memory:" is none), else
// opencode.db in its data directory ($XDG_DATA_HOME/opencode, else
// ~/.local/share/opencode). "" when it cannot be told.
func sessionDB(env []string) string {
	data := runner.Getenv(env, "XDG_DATA_HOME")
	if !filepath.IsAbs(data) {
		home := runner.Getenv(env, "HOME")
		if !filepath.IsAbs(home) {
			return ""
		}
		data = filepath.Join(home, ".local", "share")
	}
	dir := filepath.Join(data, "opencode")
	switch db := runner.Getenv(env, "OPENCODE_DB"); {
	case db == ":memory:":
		return ""
	case filepath.IsAbs(db):
		return db
	case db != "":
		return filepath.Join(dir, db)
	}
	return filepath.Join(dir, "opencode.db")
}

// dbTimeout bounds reading the session database (another OpenCode may be
// writing it: SQLite's busy handler waits for it).
const dbTimeout = 5 * time.Second

// runUsage is the usage of every model response of a live run: OpenCode's
// ACP answers a prompt with its last response's tokens only and sends no
// per-response usage, while its session database (db) keeps each
// response's step-finish part, with the tokens and cost `opencode run`
// prints in step_finish. The run's are the parts of session created since
// the process was started (a resumed session's earlier ones are older);
// their sum, turns = their number, as headless. ok is false when there are
// none, or the database cannot be read (then the prompt's usage stands).
// The database is only read, once the process has ended.
func runUsage(db, session string, since time.Time) (drover.Usage, bool) {
	if db == "" || session == "" {
		return drover.Usage{}, false
	}
	if _, err := os.Stat(db); err != nil {
		return drover.Usage{}, false
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	conn, err := sql.Open("sqlite", "file:"+(&url.URL{Path: db}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return drover.Usage{}, false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	rows, err := conn.QueryContext(ctx, `SELECT data FROM part WHERE session_id = ? AND time_created >= ? ORDER BY time_created, id`,
		session, since.UnixMilli())
	if err != nil {
		return drover.Usage{}, false
	}
	defer rows.Close()
	var u drover.Usage
	var steps int64
	for rows.Next() {
		var data []byte
		if rows.Scan(&data) != nil {
			return drover.Usage{}, false
		}
		var p part
		if runner.Unmarshal(data, &p) != nil || p.Type != "step-finish" {
			continue
		}
		steps++
		addStep(&u, p.Tokens, p.Cost)
	}
	if rows.Err() != nil || steps == 0 {
		return drover.Usage{}, false
	}
	u.Turns = &steps
	return u, true
}
