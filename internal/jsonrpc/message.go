package jsonrpc

import (
	"encoding/json"
	"slices"
	"strconv"
)

// Standard JSON-RPC and MCP error codes.
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
	CodeUnsupportedVersion = -32022 // MCP 2026-07-28: protocol version not supported
)

// Message is any JSON-RPC 2.0 message as it sits on the wire. A request
// has Method and ID, a notification Method and no ID, a response ID and
// Result or Error.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return "jsonrpc error " + strconv.Itoa(e.Code) + ": " + e.Message }

// IsNotification reports whether m is a request that expects no answer.
func (m *Message) IsNotification() bool { return m.Method != "" && m.ID == nil }

// AppendResponse appends one response line (with its newline) to dst.
// id must be a valid JSON id (number, string or null); result is the raw
// JSON result.
func AppendResponse(dst []byte, id json.RawMessage, result []byte) []byte {
	// One allocation of the right size: appending a large result to a
	// small dst would otherwise size it exactly, and the closing "}\n"
	// would then double it.
	dst = slices.Grow(dst, len(`{"jsonrpc":"2.0","id":,"result":}`)+1+max(len(id), len("null"))+len(result))
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, "}\n"...)
}

// AppendError appends one error response line (with its newline) to dst.
func AppendError(dst []byte, id json.RawMessage, e *Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":`...)
	b, _ := json.Marshal(e) // Error always marshals
	dst = append(dst, b...)
	return append(dst, "}\n"...)
}

func appendID(dst []byte, id json.RawMessage) []byte {
	if len(id) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}
