package secret

import "testing"

// TestSEC3_NamesThatHoldCredentials: the names redaction and the agents'
// environment treat as credentials, and look-alikes that are not.
func TestSEC3_NamesThatHoldCredentials(t *testing.T) {
	for _, n := range []string{"OPENAI_API_KEY", "GITHUB_TOKEN", "Authorization", "X-Api-Key", "ANTHROPIC_AUTH_TOKEN",
		"PGPASSWORD", "MYSQL_PWD", "NGROK_AUTHTOKEN", "AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
		"my.private.key", "CLIENTSECRET", "DOCKER_PASS", "GH_PAT"} {
		if !Name(n) {
			t.Errorf("Name(%q) = false, want true", n)
		}
	}
	for _, n := range []string{"GIT_AUTHOR_NAME", "PWD", "OLDPWD", "KEYBOARD_LAYOUT", "PATH", "HOME", "TOKENIZERS_PARALLELISM",
		"PASSAGE", "DROVER_DB", "DATABASE_URL"} {
		if Name(n) {
			t.Errorf("Name(%q) = true, want false", n)
		}
	}
}

// TestSEC5_PasswordsInURLs: a URL with a password is a credential; one
// without, or a value that is no URL, is not.
func TestSEC5_PasswordsInURLs(t *testing.T) {
	for v, want := range map[string]bool{
		"postgres://drover:s3cret@db:5432/drover": true,
		"https://user:pw@example.test/x":          true,
		"postgres://drover@127.0.0.1/drover":      false,
		"https://example.test/a@b":                false,
		"me@example.test":                         false,
		"plain":                                   false,
	} {
		if got := InURL(v); got != want {
			t.Errorf("InURL(%q) = %v, want %v", v, got, want)
		}
	}
}
