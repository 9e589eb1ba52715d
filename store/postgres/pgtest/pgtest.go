// Package pgtest gives a test a PostgreSQL database of its own, on the
// server named by $DROVER_TEST_POSTGRES: a postgres:// URL of the server's
// maintenance database, as a user that may create databases (e.g.
// postgres://postgres@127.0.0.1:5432/postgres). scripts/test starts a
// throwaway server and sets it.
//
// Tests that need PostgreSQL fail when the variable is unset, saying how
// to run them — they are never skipped silently — unless
// DROVER_TEST_POSTGRES_SKIP is set to 1, which skips them.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the server; SkipEnv=1 skips the tests that need one.
const (
	Env     = "DROVER_TEST_POSTGRES"
	SkipEnv = "DROVER_TEST_POSTGRES_SKIP"
)

// ServerURL returns $DROVER_TEST_POSTGRES. Without it, t fails with how to
// run the test (or is skipped, with DROVER_TEST_POSTGRES_SKIP=1).
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u != "" {
		return u
	}
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("%s=1: skipping a test that needs PostgreSQL", SkipEnv)
	}
	t.Fatalf("this test needs PostgreSQL: set %s to the URL of a server's maintenance database as a user that may create databases "+
		"(e.g. %s=postgres://postgres@127.0.0.1:5432/postgres), or run scripts/test, which starts a throwaway server; "+
		"%s=1 skips these tests", Env, Env, SkipEnv)
	return ""
}

// NewDatabase creates an empty database on the server of ServerURL and
// returns its URL; the database is dropped when t ends (whoever is still
// connected to it is disconnected first).
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := ServerURL(t)
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s=%s: want a postgres:// URL (%v)", Env, u.Redacted(), err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "drover_test_" + hex.EncodeToString(b)
	exec(t, admin, `CREATE DATABASE `+name)
	t.Cleanup(func() { exec(t, admin, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
	u.Path = "/" + name
	return u.String()
}

// exec runs one statement on a connection of its own to admin.
func exec(t testing.TB, admin, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to the test server (%s): %v", Env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
