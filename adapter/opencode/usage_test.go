package opencode

import (
	"database/sql"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover"
)

// sessionDBFixture is testdata/sessiondb-1.18.33.json: the part table of
// OpenCode 1.18.33's session database, with the rows of one session that
// two live runs through drover left (see its note).
type sessionDBFixture struct {
	Runs []int64  `json:"runs"`
	DDL  []string `json:"ddl"`
	Rows []struct {
		ID          string `json:"id"`
		MessageID   string `json:"message_id"`
		SessionID   string `json:"session_id"`
		TimeCreated int64  `json:"time_created"`
		TimeUpdated int64  `json:"time_updated"`
		Data        string `json:"data"`
	} `json:"rows"`
}

// fixtureDB writes a session database in WAL mode, as OpenCode keeps it,
// with the fixture's rows created before until (all when 0), and returns
// its path, the fixture and the database, still open (as another OpenCode
// would have it).
func fixtureDB(t *testing.T, until int64) (string, sessionDBFixture, *sql.DB) {
	t.Helper()
	data, err := os.ReadFile("testdata/sessiondb-1.18.33.json")
	if err != nil {
		t.Fatal(err)
	}
	var f sessionDBFixture
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "opencode", "opencode.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, ddl := range f.DDL {
		if _, err := db.Exec(ddl); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range f.Rows {
		if until != 0 && r.TimeCreated >= until {
			continue
		}
		if _, err := db.Exec("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", r.ID, r.MessageID, r.SessionID, r.TimeCreated, r.TimeUpdated, r.Data); err != nil {
			t.Fatal(err)
		}
	}
	return path, f, db
}

// TestACC1_OpenCodeRunUsageFromSessionDB: a live run's usage is the sum
// over the step-finish parts its session got since the run started, read
// from OpenCode's own database: three responses of 1000/100 are 3000/300
// in 3 turns (the prompt's answer said 1000/100); the run that resumed the
// session counts its one response, not the earlier run's; text, tool and
// step-start parts, other sessions and a database that cannot be read
// count nothing (ok false: the prompt's usage stands).
func TestACC1_OpenCodeRunUsageFromSessionDB(t *testing.T) {
	check := func(name string, got drover.Usage, ok bool, in, out, turns int64) {
		t.Helper()
		if !ok || got.InputTokens != in || got.OutputTokens != out || got.Turns == nil || *got.Turns != turns {
			t.Errorf("%s: usage %+v (turns %v), %v; want %d/%d in %d turns", name, got, got.Turns, ok, in, out, turns)
		}
		if got.TotalCostUSD == nil || *got.TotalCostUSD != 0 || got.ReasoningTokens == nil || got.CacheReadTokens == nil {
			t.Errorf("%s: usage %+v: want cost 0 and reasoning and cache counts as OpenCode gave them", name, got)
		}
	}
	// At the end of the first run.
	path, f, _ := fixtureDB(t, 0)
	first, _, _ := fixtureDB(t, f.Runs[1])
	session := f.Rows[0].SessionID
	u, ok := runUsage(first, session, time.UnixMilli(f.Runs[0]))
	check("first run", u, ok, 3000, 300, 3)
	// The run that resumed it: its own response only.
	u, ok = runUsage(path, session, time.UnixMilli(f.Runs[1]))
	check("resumed run", u, ok, 500, 50, 1)

	for name, c := range map[string]struct {
		db, session string
		since       time.Time
	}{
		"another session":      {path, "ses_other", time.UnixMilli(f.Runs[0])},
		"nothing since":        {path, session, time.UnixMilli(f.Rows[len(f.Rows)-1].TimeCreated + 1)},
		"no database":          {filepath.Join(t.TempDir(), "opencode.db"), session, time.UnixMilli(f.Runs[0])},
		"no database path":     {"", session, time.UnixMilli(f.Runs[0])},
		"no session":           {path, "", time.UnixMilli(f.Runs[0])},
		"not a database":       {writeTemp(t, "not sqlite"), session, time.UnixMilli(f.Runs[0])},
		"a database, no parts": {emptyDB(t), session, time.UnixMilli(f.Runs[0])},
	} {
		if u, ok := runUsage(c.db, c.session, c.since); ok {
			t.Errorf("%s: usage %+v, want none", name, u)
		}
	}
}

// TestACC1_OpenCodeRunUsageSums: reasoning, cache and cost of every step
// are summed as headless sums its step_finish lines; a part recorded
// without tokens counts as a turn.
func TestACC1_OpenCodeRunUsageSums(t *testing.T) {
	path, f, db := fixtureDB(t, 1) // the table, no rows
	for i, data := range []string{
		`{"type":"step-finish","reason":"tool-calls","tokens":{"input":10,"output":2,"reasoning":3,"cache":{"read":100,"write":7}},"cost":0.25}`,
		`{"type":"step-finish","reason":"stop","tokens":{"input":20,"output":4,"reasoning":5,"cache":{"read":200,"write":0}},"cost":0.5}`,
		`{"type":"step-finish","reason":"stop"}`,
		`{"type":"reasoning","text":"hm"}`,
		`not json`,
	} {
		if _, err := db.Exec("INSERT INTO part VALUES (?, 'm', 's', ?, ?, ?)", "p"+string(rune('a'+i)), f.Runs[0]+int64(i), f.Runs[0]+int64(i), data); err != nil {
			t.Fatal(err)
		}
	}
	u, ok := runUsage(path, "s", time.UnixMilli(f.Runs[0]))
	if !ok || u.InputTokens != 30 || u.OutputTokens != 6 || *u.ReasoningTokens != 8 || *u.CacheReadTokens != 300 ||
		*u.CacheWriteTokens != 7 || *u.TotalCostUSD != 0.75 || *u.Turns != 3 {
		t.Fatalf("usage %+v %v", u, ok)
	}
}

// TestACC1_OpenCodeSessionDBPath: the database is where OpenCode 1.18.33
// opens it for the process's environment.
func TestACC1_OpenCodeSessionDBPath(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"HOME=/u"}, "/u/.local/share/opencode/opencode.db"},
		{[]string{"HOME=/u", "XDG_DATA_HOME=/h/data"}, "/h/data/opencode/opencode.db"},
		{[]string{"HOME=/u", "XDG_DATA_HOME=/h/data", "XDG_DATA_HOME=/h2/data"}, "/h2/data/opencode/opencode.db"},
		{[]string{"HOME=/u", "OPENCODE_DB=/db/x.db"}, "/db/x.db"},
		{[]string{"HOME=/u", "OPENCODE_DB=mine.db"}, "/u/.local/share/opencode/mine.db"},
		{[]string{"HOME=/u", "OPENCODE_DB=:memory:"}, ""},
		{[]string{"HOME=relative"}, ""},
		{[]string{"PATH=/bin"}, ""},
	} {
		if got := sessionDB(c.env); got != c.want {
			t.Errorf("sessionDB(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

// TestACC1_OpenCodeDialectRunUsage: the live dialect reads the run's usage
// from the session database of the process's environment (an endpoint
// run's config home), for the parts since it was prepared.
func TestACC1_OpenCodeDialectRunUsage(t *testing.T) {
	path, f, _ := fixtureDB(t, 0)
	env := []string{"HOME=/nowhere", "XDG_DATA_HOME=" + filepath.Dir(filepath.Dir(path))}
	d := acpDialect("", sessionDB(env), time.UnixMilli(f.Runs[1]))
	if u, ok := d.RunUsage(f.Rows[0].SessionID); !ok || u.InputTokens != 500 || u.OutputTokens != 50 {
		t.Fatalf("usage %+v %v", u, ok)
	}
	if u, ok := acpDialect("", "", time.Time{}).RunUsage(f.Rows[0].SessionID); ok {
		t.Fatalf("usage without a database %+v", u)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "opencode.db")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func emptyDB(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "opencode.db")
	db, err := sql.Open("sqlite", "file:"+p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE other (x)"); err != nil {
		t.Fatal(err)
	}
	return p
}
