//go:build linux

// Package bench is drover's benchmark harness (docs/performance.md):
// a fake vendor CLI that prints N real-shaped lines the way Claude Code,
// Gemini CLI or Codex print them to drover, and the measurements of
// `drover run --json` and `drover serve` against it, each beside a floor
// measured in the same run (the same fake piped into cat).
//
// One executable is both the harness and the fake: run under the name of
// a vendor's command (claude, gemini, codex; the harness links those names
// to it in a bin directory first on PATH, which is how drover finds a
// vendor), or with RoleEnv set, it is the fake (IsFake, FakeMain). The
// fake reads its script from the DROVERTEST_BENCH_* environment (FakeConfig).
//
// Every process a measurement starts is stopped and waited for before it
// returns: drover, cat, the fake and the fake's children, found by a tag
// in their environment should drover leave any behind (which is reported).
//
// The package reads /proc and is Linux only.
package bench
