package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/testkit/apitest"
	"github.com/drover-run/drover/server"
)

// TestAPI1_AddedOpReachesHTTP: an operation added to the service's table
// is served at its routes — a POST's params from its body, a GET's from
// its path and query — and reached by the HTTP client, with nothing
// written for it in the HTTP face.
func TestAPI1_AddedOpReachesHTTP(t *testing.T) {
	f := newFixture(t, server.Config{})
	srv := server.New(api.NewLocal(f.sup, api.Config{}), server.Config{Ops: apitest.Ops()})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	g := &fixture{ts: ts, srv: srv}
	var res apitest.EchoResult
	if code := g.do(t, "POST", "/v1/echo", `{"say":"hi","times":2}`, &res); code != http.StatusOK || !slices.Equal(res.Said, []string{"hi", "hi"}) || res.API != api.Version {
		t.Fatalf("POST /v1/echo: %d %+v", code, res)
	}
	if code := g.do(t, "GET", "/v1/echo/there?times=3", "", &res); code != http.StatusOK || !slices.Equal(res.Said, []string{"there", "there", "there"}) {
		t.Fatalf("GET /v1/echo/there: %d %+v", code, res)
	}
	g.fail(t, "POST", "/v1/echo", `{"say":"hi","volume":11}`, http.StatusBadRequest, api.CodeInvalidRequest)
	// The HTTP client reaches it as it reaches every op: through the
	// op's own function over the client.
	c, err := server.NewClient(ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := apitest.Echo.Call(context.Background(), c, apitest.EchoParams{Say: "remote"})
	if r, ok := out.(*apitest.EchoResult); err != nil || !ok || !slices.Equal(r.Said, []string{"remote"}) {
		t.Fatalf("through the client: %+v %v", out, err)
	}
	// Without it in the table, there is no such route.
	if code := f.do(t, "POST", "/v1/echo", `{"say":"hi"}`, nil); code != http.StatusNotFound {
		t.Fatalf("echo on a server without it: %d", code)
	}
}
