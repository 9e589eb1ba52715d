package runner

import (
	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1Options make jsonv2 decode exactly as encoding/json does (field names
// matched case-insensitively, duplicate names and invalid UTF-8 accepted,
// RawMessage fields kept as their raw bytes).
var v1Options = jsonv1.DefaultOptionsV1()

// Unmarshal decodes data into v with encoding/json's semantics, but in one
// pass: encoding/json first scans the whole input for validity and then
// decodes it, and that scan was a fifth of a recorded run's CPU (issue 12).
// Adapters decode every native line, and the RawMessage parts of it they
// look into, with it.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, v1Options)
}
