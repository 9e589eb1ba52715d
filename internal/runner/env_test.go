package runner

import (
	"slices"
	"testing"
)

// TestSEC5_AgentEnvironment: an agent inherits drover's environment without
// drover's own variables and without credentials, but those its vendor
// reads and the proxies.
func TestSEC5_AgentEnvironment(t *testing.T) {
	in := []string{
		"PATH=/usr/bin", "HOME=/home/u", "PWD=/w",
		"DROVER_TOKEN=t0k", "DROVER_DB=postgres://drover:pw@db/drover", "DROVER_SERVER=http://127.0.0.1:7777", "DROVER_CLAUDE_BIN=/x",
		"GITHUB_TOKEN=ghp", "PGPASSWORD=pw", "MYSQL_PWD=pw", "NGROK_AUTHTOKEN=n", "DATABASE_URL=postgres://app:pw@db/app",
		"ANTHROPIC_API_KEY=sk-ant", "OPENAI_API_KEY=sk-oai",
		"HTTPS_PROXY=http://u:pw@proxy:3128", "no_proxy=localhost",
		"GIT_AUTHOR_NAME=me", "PLAIN_URL=https://example.test/x",
	}
	got := scrub(in, Prefixes("ANTHROPIC_"))
	want := []string{"PATH=/usr/bin", "HOME=/home/u", "PWD=/w", "ANTHROPIC_API_KEY=sk-ant",
		"HTTPS_PROXY=http://u:pw@proxy:3128", "no_proxy=localhost", "GIT_AUTHOR_NAME=me", "PLAIN_URL=https://example.test/x"}
	if !slices.Equal(got, want) {
		t.Errorf("scrub:\n got %q\nwant %q", got, want)
	}
	if got := scrub(in, nil); slices.Contains(got, "ANTHROPIC_API_KEY=sk-ant") {
		t.Errorf("without keep a vendor key got through: %q", got)
	}
}
