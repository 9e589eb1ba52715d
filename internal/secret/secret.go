// Package secret recognises credentials by the name of the variable or
// header that holds them, or by a password inside a URL: the one test the
// ledger's redaction (SEC-3) and the agents' environment (SEC-5) share.
package secret

import (
	"net/url"
	"slices"
	"strings"
)

// words are the words of a name (split at "_", "-" and ".") that say its
// value is a credential.
var words = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIAL",
	"CREDENTIALS", "AUTH", "AUTHORIZATION", "COOKIE", "PAT", "PRIVATE"}

// suffixes end a word that says so too, glued to a prefix: PGPASSWORD,
// NGROK_AUTHTOKEN, CLIENTSECRET.
var suffixes = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIALS"}

// notSecret are names made of such words that hold none: the working
// directories.
var notSecret = []string{"PWD", "OLDPWD"}

// Name reports whether an environment variable or header named name holds
// a credential by its words: OPENAI_API_KEY, GITHUB_TOKEN, Authorization,
// X-Api-Key, PGPASSWORD, MYSQL_PWD, NGROK_AUTHTOKEN (but not
// GIT_AUTHOR_NAME, PWD or KEYBOARD_LAYOUT).
func Name(name string) bool {
	up := strings.ToUpper(name)
	if slices.Contains(notSecret, up) {
		return false
	}
	for _, w := range strings.FieldsFunc(up, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if slices.Contains(words, w) {
			return true
		}
		for _, s := range suffixes {
			if strings.HasSuffix(w, s) {
				return true
			}
		}
	}
	return false
}

// InURL reports whether value is a URL that carries a password
// (postgres://user:pw@host/db): a credential whatever its variable is
// called.
func InURL(value string) bool {
	if !strings.Contains(value, "://") || !strings.Contains(value, "@") {
		return false
	}
	u, err := url.Parse(value)
	if err != nil || u.User == nil {
		return false
	}
	_, has := u.User.Password()
	return has
}
