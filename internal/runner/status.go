package runner

import (
	"math"
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// StatusRules is one vendor's mapping of a failed API call, an HTTP status
// and the error text that came with it, to a drover.ErrorCode. The zero
// value is the mapping every vendor shares; a vendor adds its own
// differences as Matches for the codes they lead to.
//
// Code tries the codes in this order, the first that matches winning:
//
//	RATE_LIMITED      429, or RateLimited
//	OVERLOADED        529, or Overloaded
//	AUTH_FAILED       401 and 403, or AuthFailed
//	CONTEXT_OVERFLOW  ContextOverflow only
//	BAD_REQUEST       400, or BadRequest
//	SERVER_ERROR      500 and above, or ServerError
//	MODEL_ERROR       anything else
//
// The order is part of the meaning: a 400 whose text says the context was
// too long can be CONTEXT_OVERFLOW before it is BAD_REQUEST.
type StatusRules struct {
	// FoldCase makes every Text match case-insensitively (write the Texts
	// in lower case); otherwise they match exactly.
	FoldCase bool

	// Each of these lists the Matches, beyond the shared statuses above,
	// that lead to the code it is named for.
	RateLimited     []Match
	Overloaded      []Match
	AuthFailed      []Match
	ContextOverflow []Match
	BadRequest      []Match
	ServerError     []Match
}

// Match recognises a status, its error text, or both. Status (or the
// range From..To) narrows the statuses it applies to, Texts the messages;
// a Match with neither matches everything.
type Match struct {
	// Status lists the statuses it applies to.
	Status []int
	// From and To, when To is set, are an inclusive range it applies to
	// besides Status.
	From, To int
	// Texts, when set, require the message to match one of them.
	Texts []Text
}

// Text matches a message that contains every one of its strings.
type Text []string

// ContainsAny reports whether s contains one of markers: how a vendor's
// texts (a denial, an overload) are recognised.
func ContainsAny(s string, markers []string) bool {
	return slices.ContainsFunc(markers, func(m string) bool { return strings.Contains(s, m) })
}

// Code maps status (0 when the vendor reported none) and the error message
// msg to an error code.
func (r StatusRules) Code(status int, msg string) drover.ErrorCode {
	if r.FoldCase {
		msg = strings.ToLower(msg)
	}
	classes := []struct {
		code drover.ErrorCode
		base Match
		also []Match
	}{
		{drover.CodeRateLimited, Match{Status: []int{429}}, r.RateLimited},
		{drover.CodeOverloaded, Match{Status: []int{529}}, r.Overloaded},
		{drover.CodeAuthFailed, Match{Status: []int{401, 403}}, r.AuthFailed},
		{drover.CodeContextOverflow, Match{}, r.ContextOverflow},
		{drover.CodeBadRequest, Match{Status: []int{400}}, r.BadRequest},
		{drover.CodeServerError, Match{From: 500, To: math.MaxInt}, r.ServerError},
	}
	for _, c := range classes {
		if c.base.hasStatus() && c.base.matches(status, msg) {
			return c.code
		}
		for _, m := range c.also {
			if m.matches(status, msg) {
				return c.code
			}
		}
	}
	return drover.CodeModelError
}

func (m Match) hasStatus() bool { return len(m.Status) > 0 || m.To > 0 }

func (m Match) matches(status int, msg string) bool {
	if m.hasStatus() && !slices.Contains(m.Status, status) && (m.To == 0 || status < m.From || status > m.To) {
		return false
	}
	if len(m.Texts) == 0 {
		return true
	}
	return slices.ContainsFunc(m.Texts, func(t Text) bool {
		return !slices.ContainsFunc(t, func(s string) bool { return !strings.Contains(msg, s) })
	})
}
