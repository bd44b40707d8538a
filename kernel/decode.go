package kernel

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/jsonrpc"
)

// A tools.invoke line may carry 4 MiB of arguments (files.write's content).
// encoding/json read them three times over (the params into invokeParams,
// the arguments into a map of raw values, each value into a string), each
// time validating every byte again and copying the values it kept; 93% of
// a large call's time went there (issue 17). The decoders here walk the
// params and the arguments once each with the module's lexer, keep the
// arguments as a slice of the line (which the turn owns: serveConn reads
// it with ReadOwnedLine), and decode each string once.

var errNotString = errors.New("not a string")

// decodeInvokeParams reads tools.invoke's params as json.Unmarshal read
// them into invokeParams, with member names matched exactly, as the
// envelope's are (docs/adr/0007): a string member that is null is left
// empty, one of another type is an error, unknown members are ignored, and
// when a name repeats the last one wins; params that are null are empty
// params. The arguments are kept, as a
// slice of raw, only when they are at most maxArgumentBytes; their size is
// kept either way.
func decodeInvokeParams(raw []byte) (invokeParams, error) {
	return decodeInvokeParamsIn(raw, false)
}

// decodeInvokeParamsIn is decodeInvokeParams for params that, when
// checked, are a value of a line jsonrpc.ParseEnvelope has checked: an
// object's members are found without reading them again, so 4 MiB of
// arguments are stepped over, not lexed a second time.
func decodeInvokeParamsIn(raw []byte, checked bool) (invokeParams, error) {
	var p invokeParams
	if string(raw) == "null" {
		return p, nil
	}
	var args []byte
	hasArgs := false
	member := func(key, value []byte) error {
		var err error
		switch string(jsonrpc.KeyName(key)) {
		case "callId":
			p.CallID, err = decodeStringMember(value)
		case "tool":
			p.Tool, err = decodeStringMember(value)
		case "catalogHash":
			p.CatalogHash, err = decodeStringMember(value)
		case "arguments":
			args, hasArgs = value, true
		case "mcp":
			p.MCP = value
		default:
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", jsonrpc.KeyName(key), err)
		}
		return nil
	}
	var err error
	if checked && isObject(raw) {
		err = jsonrpc.EachValidMember(raw, member)
	} else {
		err = jsonrpc.EachMember(raw, member) // the errors name what is wrong
	}
	if err != nil {
		return invokeParams{}, err
	}
	if hasArgs {
		p.Arguments.size = len(args)
		if len(args) <= maxArgumentBytes {
			p.Arguments.raw = args
		}
	}
	return p, nil
}

// isObject reports whether the JSON value raw, whitespace around it
// allowed, is an object.
func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// decodeStringMember decodes a member json.Unmarshal would have decoded
// into a string field: null leaves it empty.
func decodeStringMember(value []byte) (string, error) {
	if string(value) != "null" && value[0] != '"' {
		return "", errNotString
	}
	return jsonrpc.DecodeString(value)
}

// parseArgs checks raw against the tool's schema: an object whose keys are
// exactly the declared parameters, each a string. It returns a message for
// the model on failure, which quotes no more than a short prefix of what
// the client sent. A key that repeats takes its last value, as
// json.Unmarshal into a map took it; a missing parameter is reported
// before a wrong type, and both before an unknown key.
//
// raw is a value of a line the kernel has checked (readMessage), or
// empty: its members are found without reading them again.
func (t *tool) parseArgs(raw []byte) (map[string]string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	values := make([][]byte, len(t.params))
	var unknown []byte
	err := jsonrpc.EachValidMember(raw, func(key, value []byte) error {
		name := jsonrpc.KeyName(key)
		for i, p := range t.params {
			if string(name) == p.name {
				values[i] = value
				return nil
			}
		}
		if unknown == nil {
			unknown = name
		}
		return nil
	})
	if err != nil {
		return nil, "arguments must be a JSON object"
	}
	args := make(map[string]string, len(t.params))
	for i, p := range t.params {
		v := values[i]
		if v == nil {
			return nil, fmt.Sprintf("missing required argument %q", p.name)
		}
		s, err := jsonrpc.DecodeString(v)
		if err != nil || v[0] != '"' {
			return nil, fmt.Sprintf("argument %q must be a string", p.name)
		}
		args[p.name] = s
	}
	if unknown != nil {
		return nil, fmt.Sprintf("unknown argument %q (allowed: %s)", clip.String(string(unknown), 64), t.paramNames())
	}
	return args, ""
}
