package acp

import "github.com/drover-run/drover/internal/jsonrpc"

// rpc writes ACP's lines: standard JSON-RPC 2.0.
var rpc jsonrpc.Codec

// codeNotFound is ACP's "resource not found" (a file that does not
// exist).
const codeNotFound = -32002
