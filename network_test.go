package drover_test

import (
	"slices"
	"testing"

	"github.com/drover-run/drover"
)

// TestSEC5_NetworkPorts: api-only allows the endpoint's port (443 without
// one, the scheme's default without a port) and the run's HTTP MCP
// servers'; a list allows those ports; anything else is a validation
// error; a restriction contains the run and cannot go with contain false.
func TestSEC5_NetworkPorts(t *testing.T) {
	mcp := map[string]drover.MCPServer{"a": {URL: "http://127.0.0.1:9000/mcp"}, "b": {Command: "x"}}
	for _, c := range []struct {
		o    drover.Options
		want []uint16
	}{
		{drover.Options{Network: "api-only"}, []uint16{443}},
		{drover.Options{Network: "api-only", Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:4567"}}, []uint16{4567}},
		{drover.Options{Network: "api-only", Endpoint: &drover.Endpoint{BaseURL: "http://proxy.test/v1"}, MCPServers: mcp}, []uint16{80, 9000}},
		{drover.Options{Network: "443, 22,443"}, []uint16{22, 443}},
	} {
		got, restricted, err := c.o.NetworkPorts()
		if err != nil || !restricted || !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v %v %v, want %v", c.o, got, restricted, err, c.want)
		}
		if on, explicit := c.o.Containment(); !on || !explicit {
			t.Errorf("%q does not contain the run", c.o.Network)
		}
	}
	if _, restricted, err := (drover.Options{}).NetworkPorts(); restricted || err != nil {
		t.Errorf("no network option: restricted %v, %v", restricted, err)
	}
	off := false
	for _, o := range []drover.Options{{Network: "none"}, {Network: "0"}, {Network: "70000"}, {Network: "api-only", Contain: &off}} {
		if err := o.Validate(); drover.CodeOf(err, "") != drover.CodeValidation {
			t.Errorf("%+v: %v, want a validation error", o, err)
		}
	}
}
