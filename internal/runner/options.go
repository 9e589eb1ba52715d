package runner

import "github.com/drover-run/drover"

// Model is the model a run asks its CLI for: Options.Model; else, with an
// Endpoint, endpointDefault (a gateway or fake server cannot be asked for
// "the CLI's default"); else "", the CLI's own default.
func Model(opts drover.Options, endpointDefault string) string {
	if opts.Model != "" {
		return opts.Model
	}
	if opts.Endpoint != nil {
		return endpointDefault
	}
	return ""
}
