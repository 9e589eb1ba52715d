// Package pgtest gives a test a PostgreSQL database of its own, on the
// server named by $DROVER_TEST_POSTGRES: a postgres:// URL of the server's
// maintenance database, as a user that may create databases (e.g.
// postgres://postgres@127.0.0.1:5432/postgres). scripts/test starts a
// throwaway server and sets it.
//
// Without the variable, tests that need PostgreSQL are skipped, saying how
// to run them, so that go test ./... passes on a fresh clone; under
// DROVER_E2E=1 (CI: scripts/test sets both) they fail instead, so CI never
// skips them.
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

// Env names the server; with CIEnv=1 a missing server fails the test.
const (
	Env   = "DROVER_TEST_POSTGRES"
	CIEnv = "DROVER_E2E"
)

// ServerURL returns $DROVER_TEST_POSTGRES. Without it, t is skipped with
// how to run the test, or fails with the same line under DROVER_E2E=1.
func ServerURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u != "" {
		return u
	}
	const how = "needs PostgreSQL: set %s=postgres://postgres@127.0.0.1:5432/postgres (a user that may create databases), or run scripts/test, which starts a throwaway server"
	if os.Getenv(CIEnv) == "1" {
		t.Fatalf(how+" (%s=1: not skipped)", Env, CIEnv)
	}
	t.Skipf(how, Env)
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
