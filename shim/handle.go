package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// Protocol versions. The legacy ones negotiate once per session with
// initialize; the modern one is stated on every request in _meta.
const (
	latestLegacy  = "2025-11-25"
	modernVersion = "2026-07-28"

	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"

	// SharedOS's wire epoch: stamped on what the shim answers, and the
	// only one a client may pin (ADR 0011).
	metaSharedOSEpoch = "sharedos/protocolVersion"
	sharedosEpoch     = "2"
)

var legacyVersions = map[string]bool{
	"2024-11-05": true,
	"2025-03-26": true,
	"2025-06-18": true,
	"2025-11-25": true,
}

// batchesAllowed reports whether the negotiated version still has JSON-RPC
// batching (it was removed in 2025-06-18).
func batchesAllowed(v string) bool { return v == "2024-11-05" || v == "2025-03-26" }

// request is one JSON-RPC request or notification from the client, as far
// as the shim needs it. params' values are slices of the stdin line, which
// the reader reuses: they are read while the line is handled, never after,
// and dropped then. id is the request's own copy, as its answer is written
// later.
type request struct {
	id     json.RawMessage // nil for a notification
	method string
	params params
	modern bool
	// own says the line is the request's: a long line, which the reader
	// assembled for it alone (jsonrpc.Reader.Long). What a call keeps of
	// it (its arguments) is then handed on, not copied.
	own bool
	// progressToken is params._meta.progressToken, the request's own copy.
	progressToken json.RawMessage
	// traceParent and traceState are params._meta's W3C trace context
	// (tools/call only), passed to the kernel: its span of the call is a
	// child of the client's; version is the MCP protocol version the
	// request was made under, as the reader saw it.
	traceParent, traceState, version string
	// elicit: the client of this tools/call can be asked with a form
	// elicitation (its era has elicitation, and it declared form mode:
	// at initialize in the legacy eras, in this request's _meta in the
	// 2026-07-28 era). elicitMode is the elicitation's mode member: "form",
	// or "" for 2025-06-18, which predates it.
	elicit     bool
	elicitMode string
}

// params are the members of a request's params that the shim reads, as
// raw JSON (nil when absent; the last one when a name repeats).
type params struct {
	name, arguments, meta        []byte // tools/call, and _meta of any request
	requestState, inputResponses []byte // a tools/call retried with input (2026-07-28)
	requestID                    []byte // notifications/cancelled
	protocolVersion, clientInfo  []byte // initialize
	capabilities                 []byte // initialize
}

// handleLine classifies one stdin line and starts answering it. It
// returns the answer to queue, or nil when nothing will be written. own
// says the line is the handler's to keep (see request.own).
func (s *server) handleLine(ctx context.Context, line []byte, own bool) *pending {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return nil // blank lines are not messages
	}
	if !utf8.Valid(trimmed) {
		return answered(parseError())
	}
	// Decoding validates; a separate validation pass would read every
	// line twice.
	if trimmed[0] == '[' {
		return s.handleBatch(ctx, trimmed)
	}
	return s.handleMessage(ctx, trimmed, own)
}

func (s *server) handleBatch(ctx context.Context, raw []byte) *pending {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return answered(parseError())
	}
	if len(elems) == 0 {
		return answered(errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: empty batch", nil))
	}
	if !batchesAllowed(s.legacyVersion) {
		return answered(errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: batches are not supported in this protocol version", nil))
	}
	batch := &pending{state: decided}
	for _, e := range elems {
		if p := s.handleMessage(ctx, e, false); p != nil {
			batch.parts = append(batch.parts, p)
			// One answer line, in kernel order when it holds a kernel
			// request, at once otherwise.
			batch.ordered = batch.ordered || p.ordered
		}
	}
	if batch.parts == nil {
		return nil
	}
	return batch
}

// handleMessage answers one message. One pass of the scanner validates it
// and finds its members, and the params it holds are found without a
// second look at their bytes (a call's arguments may be megabytes);
// encoding/json would validate it, then decode it into a map, copying
// every value.
func (s *server) handleMessage(ctx context.Context, raw []byte, own bool) *pending {
	e, err := jsonrpc.ParseEnvelope(raw)
	if err != nil {
		if !json.Valid(raw) {
			return answered(parseError())
		}
		return answered(errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: not a JSON object", nil))
	}
	idOK := e.ID != nil
	if idOK && !jsonrpc.ValidID(e.ID) {
		return answered(errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: id must be a string or a number", nil))
	}
	id := bytes.Clone(e.ID)
	if string(e.JSONRPC) != `"2.0"` && !isVersion2(e.JSONRPC) {
		return answered(errorLine(id, jsonrpc.CodeInvalidRequest, `invalid request: jsonrpc must be "2.0"`, nil))
	}
	if e.Method == nil {
		if idOK && (e.Result != nil || e.Error != nil) {
			// A response: the client's answer to an elicitation, the
			// one request the shim sends it.
			s.clientAnswered(e.ID, e.Result, e.Error != nil && string(e.Error) != "null")
			return nil
		}
		return answered(errorLine(id, jsonrpc.CodeInvalidRequest, "invalid request: no method", nil))
	}
	method, err := methodName(e.Method)
	if err != nil || method == "" {
		return answered(errorLine(id, jsonrpc.CodeInvalidRequest, "invalid request: method must be a non-empty string", nil))
	}
	req := &request{id: id, method: method, own: own}
	if e.Params != nil && string(e.Params) != "null" {
		p := &req.params
		err := jsonrpc.EachValidMember(e.Params, func(key, value []byte) error {
			switch string(jsonrpc.KeyName(key)) {
			case "name":
				p.name = value
			case "arguments":
				p.arguments = value
			case "_meta":
				p.meta = value
			case "requestId":
				p.requestID = value
			case "protocolVersion":
				p.protocolVersion = value
			case "clientInfo":
				p.clientInfo = value
			case "capabilities":
				p.capabilities = value
			case "requestState":
				p.requestState = value
			case "inputResponses":
				p.inputResponses = value
			}
			return nil
		})
		if err != nil {
			if !idOK {
				return nil
			}
			return answered(errorLine(id, jsonrpc.CodeInvalidParams, "invalid params: params must be an object", nil))
		}
	}
	if !idOK {
		s.handleNotification(req)
		return nil
	}
	if meta := req.params.meta; meta != nil {
		m := readMeta(meta)
		if m.version != nil {
			if out := s.checkModern(req, m); out != nil {
				return s.answer(req, out)
			}
			req.modern = true
		}
		if m.epoch != nil && (req.method == "tools/call" || req.method == "initialize") && string(m.epoch) != `"`+sharedosEpoch+`"` {
			// Before anything is invoked or negotiated: this client
			// expects a bridge of another epoch.
			data, _ := marshal(map[string]any{"code": "unsupported_protocol_version", "supported": []string{sharedosEpoch}, "requested": json.RawMessage(m.epoch)})
			return s.answer(req, errorLine(req.id, jsonrpc.CodeInvalidParams, "invalid params: unsupported SharedOS protocol version", data))
		}
		if req.method == "tools/call" && m.progressToken != nil {
			req.progressToken = bytes.Clone(m.progressToken)
		}
		if req.method == "tools/call" && m.traceParent != nil {
			req.traceParent, req.traceState = traceString(m.traceParent, maxTraceParent), traceString(m.traceState, maxTraceState)
		}
		if req.modern && req.method == "tools/call" {
			req.elicit, req.elicitMode = elicitsForm(m.caps), "form"
		}
	}
	if !req.modern && req.method == "tools/call" && s.legacyElicit {
		req.elicit = true
		if s.legacyVersion >= "2025-11-25" {
			req.elicitMode = "form"
		}
	}
	p := s.handleRequest(ctx, req)
	// Read: the line's values are not kept past its handling, through an
	// answer that keeps req until it is written.
	req.params = params{}
	return p
}

// isVersion2 reports whether raw, a JSON value other than "2.0" as
// written, is that string written with escapes.
func isVersion2(raw []byte) bool {
	version, err := jsonrpc.DecodeString(raw)
	return err == nil && version == "2.0"
}

// methodName decodes a request's method: the methods a harness sends on
// every call as constants, without a string made for each.
func methodName(raw []byte) (string, error) {
	switch string(raw) {
	case `"tools/call"`:
		return "tools/call", nil
	case `"notifications/cancelled"`:
		return "notifications/cancelled", nil
	}
	return jsonrpc.DecodeString(raw)
}

// meta is what the shim reads from a request's params._meta (values as
// raw JSON, nil when absent).
type meta struct {
	version, caps, epoch, progressToken []byte
	traceParent, traceState             []byte
}

func readMeta(raw json.RawMessage) meta {
	var m meta
	jsonrpc.EachValidMember(raw, func(key, value []byte) error {
		switch string(jsonrpc.KeyName(key)) {
		case metaProtocolVersion:
			m.version = value
		case metaClientCaps:
			m.caps = value
		case metaSharedOSEpoch:
			m.epoch = value
		case "progressToken":
			if jsonrpc.ValidID(value) { // a progress token is a string or a number too
				m.progressToken = value
			}
		case "traceparent":
			m.traceParent = value
		case "tracestate":
			m.traceState = value
		}
		return nil
	})
	return m
}

// Bounds of the trace context passed on: a W3C traceparent is 55
// characters in its version 00, a tracestate at most 512.
const (
	maxTraceParent = 128
	maxTraceState  = 512
	// maxRequestID bounds the request id passed on for the kernel's
	// jsonrpc.request.id; a longer one is not.
	maxRequestID = 128
)

// traceString is a trace context member's value when it is a string of at
// most max bytes; anything else is not passed on (the call goes on
// without it).
func traceString(raw []byte, max int) string {
	if len(raw) == 0 || raw[0] != '"' || len(raw) > max+2 {
		return ""
	}
	s, err := jsonrpc.DecodeString(raw)
	if err != nil || len(s) > max {
		return ""
	}
	return s
}

func parseError() []byte {
	return errorLine(nil, jsonrpc.CodeParseError, "parse error: not a JSON text", nil)
}

// checkModern checks a request whose _meta names a protocol version (the
// modern era): the error line to answer instead, or nil.
func (s *server) checkModern(req *request, m meta) []byte {
	version, err := jsonrpc.DecodeString(m.version)
	if err != nil {
		return errorLine(req.id, jsonrpc.CodeInvalidParams, "invalid params: _meta protocolVersion must be a string", nil)
	}
	if version != modernVersion {
		data, _ := marshal(map[string]any{"supported": []string{modernVersion}, "requested": version})
		return errorLine(req.id, jsonrpc.CodeUnsupportedVersion, "unsupported protocol version", data)
	}
	if len(m.caps) == 0 || m.caps[0] != '{' {
		return errorLine(req.id, jsonrpc.CodeInvalidParams, "invalid params: _meta must carry "+metaClientCaps+" as an object", nil)
	}
	return nil
}

func (s *server) handleNotification(req *request) {
	switch req.method {
	case "notifications/cancelled":
		s.cancelRequest(req.params.requestID)
	default:
		// notifications/initialized and anything unknown: nothing to do.
	}
}

func (s *server) handleRequest(ctx context.Context, req *request) *pending {
	switch {
	case req.method == "tools/list":
		return s.toolsList(ctx, req)
	case req.method == "tools/call":
		// Read here, on the reader, which alone changes legacyVersion.
		req.version = s.legacyVersion
		if req.modern {
			req.version = modernVersion
		}
		return s.toolsCall(ctx, req)
	case req.method == "initialize" && !req.modern:
		return s.answer(req, s.initialize(req))
	case req.method == "ping" && !req.modern:
		return s.answer(req, resultLine(req.id, []byte("{}")))
	case req.method == "server/discover" && req.modern:
		return s.answer(req, s.discover(req))
	}
	return s.answer(req, errorLine(req.id, jsonrpc.CodeMethodNotFound, "method not found: "+req.method, nil))
}

// answer is the shim's own answer to req, ready to go out at once; until
// it is written, a cancellation still drops it.
func (s *server) answer(req *request, line []byte) *pending {
	p := answered(line)
	s.update(func(st *turnState) { st.register(req.id, p) })
	return p
}

// cancelRequest drops the answer to a pending request and stops the work
// behind it. Unknown or already answered ids are ignored.
func (s *server) cancelRequest(id json.RawMessage) {
	key := compactID(id)
	s.update(func(st *turnState) {
		if p, ok := st.byID[string(key)]; ok {
			s.cancel(st, p)
		}
	})
}

func compactID(id json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return id
	}
	return b.Bytes()
}
