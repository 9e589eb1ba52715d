package runner

import (
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1Options make jsonv2 decode exactly as encoding/json does (field names
// matched case-insensitively, duplicate names and invalid UTF-8 accepted,
// RawMessage fields kept as their raw bytes).
var v1Options = jsonv1.DefaultOptionsV1()

// Unmarshal decodes data into v with encoding/json's semantics, but in one
// pass: encoding/json first scans the whole input for validity and then
// decodes it, and that scan was a fifth of a recorded run's CPU.
// Adapters decode every native line, and the RawMessage parts of it they
// look into, with it.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, v1Options)
}

// DecodeOrSkip decodes the next value of dec into v, within the pass that
// is decoding the whole line with Unmarshal. It is for a part of a line an
// adapter looks into only when it has one shape: decoding that part as a
// RawMessage and then Unmarshal of the copy into v scanned it twice and
// copied it. Called from a field type's UnmarshalJSONFrom, it behaves as
// that did: a value of another shape than v (a semantic error: a string
// where v wants an object, a block whose text is a number) does not fail
// the line; it is reported as ok false, v's contents then undefined. A
// syntax error is returned: the line is not JSON.
func DecodeOrSkip(dec *jsontext.Decoder, v any) (ok bool, err error) {
	depth := dec.StackDepth()
	err = jsonv2.UnmarshalDecode(dec, v)
	var syntax *jsontext.SyntacticError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return false, err
	case dec.StackDepth() != depth:
		// Unmarshal's (encoding/json's) semantics report a semantic
		// error once the whole value has been read; other options stop
		// inside it, where the line cannot be read on.
		return false, fmt.Errorf("decode without Unmarshal's options: %w", err)
	}
	return false, nil
}
