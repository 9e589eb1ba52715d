// Package apitest holds an operation that is not part of drover's service,
// for the tests that prove an operation added to the service reaches every
// face (API-1) with nothing written for it in the face: the faces take the
// table of operations (api.Ops) as configuration, and these tests hand
// them the table with Echo added.
package apitest

import (
	"context"

	"github.com/drover-run/drover/api"
)

// EchoParams are what Echo takes.
type EchoParams struct {
	Say   string `json:"say" jsonschema:"what to say back"`
	Times int    `json:"times,omitempty" jsonschema:"how many times"`
}

// EchoResult is what Echo answers: what it was told, and the version of
// the API of the service it went through (so the service was reached).
type EchoResult struct {
	Said  []string `json:"said"`
	API   int      `json:"api"`
	Agent bool     `json:"agent"`
}

// Echo is an operation added to the service: it says back what it is
// told, Times times, with the service's API version (Service.Info), at
// "POST /v1/echo" and "GET /v1/echo/{say}"; agents may call it.
var Echo = api.Define("echo", "Say back what it is told.", func(s api.Service, ctx context.Context, p EchoParams) (*EchoResult, error) {
	info, err := s.Info(ctx, api.InfoParams{})
	if err != nil {
		return nil, err
	}
	_, confined := s.(*api.Confined)
	r := &EchoResult{Said: []string{}, API: info.API, Agent: confined}
	for range max(p.Times, 1) {
		r.Said = append(r.Said, p.Say)
	}
	return r, nil
}, api.Op{Routes: []string{"POST /v1/echo", "GET /v1/echo/{say}"}, Agent: true})

// Ops are the service's operations with Echo.
func Ops() []api.Op { return append(append([]api.Op{}, api.Ops...), Echo) }
