package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sharedos/sharedos-mcp/bench/internal/synth"
)

// decodePath is where kernelDecode's files.write calls go: a directory
// that does not exist, so that no call writes anything. A call with a
// payload over the kernel's file size limit is refused too_large once its
// arguments are decoded, before the path is looked at; a small one is
// refused not_found after the same checks. Both run the kernel's whole
// path from the socket line to the tool's arguments.
const decodePath = "/no such dir/x"

// maxDecodedArguments is the most JSON of arguments the reference kernel
// decodes (kernel.maxArgumentBytes); past it a call is refused too_large
// before its arguments are read.
const maxDecodedArguments = 4 << 20

// kernelDecode measures how long the reference kernel takes to decode a
// tools.invoke whose arguments carry payload (a JSON string, cut so the
// arguments are at most maxDecodedArguments): the median
// round trip of files.write with it, less that of files.write with one
// byte, over reps calls each after one of each to warm up. valid is the
// median time json.Valid takes over the same arguments, the floor the
// target compares it with.
func kernelDecode(socket string, payload []byte, reps int) (decode, valid time.Duration, err error) {
	c, _, done, err := open(peer{}, socket)
	if err != nil {
		return 0, 0, err
	}
	defer done()
	hash, err := catalogHash(c)
	if err != nil {
		return 0, 0, err
	}
	argsOf := func(content []byte) []byte {
		return slices.Concat([]byte(`{"path":"`+decodePath+`","content":`), content, []byte(`}`))
	}
	big, small := argsOf(payload), argsOf([]byte(`"x"`))
	if len(big) > maxDecodedArguments {
		// The kernel refuses larger arguments unread: the payload is
		// cut to arguments of exactly the most it decodes.
		big = argsOf(synth.PayloadString(len(payload) - (len(big) - maxDecodedArguments)))
	}
	line := func(id int, args []byte) [][]byte {
		n := strconv.Itoa(id)
		return [][]byte{
			[]byte(`{"jsonrpc":"2.0","id":` + n + `,"method":"tools.invoke","params":{"callId":"c` + n + `","tool":"files.write","arguments":`),
			args,
			[]byte(`,"catalogHash":"` + hash + `"}}` + "\n"),
		}
	}
	var bigs, smalls, valids []time.Duration
	id := 10
	for i := range reps + 1 {
		for _, call := range []struct {
			args []byte
			code string
			ds   *[]time.Duration
		}{{small, `"not_found"`, &smalls}, {big, `"too_large"`, &bigs}} {
			id++
			d, answer, err := c.payloadTrip(id, line(id, call.args))
			if err != nil {
				return 0, 0, err
			}
			if !bytes.Contains(answer, []byte(call.code)) {
				return 0, 0, fmt.Errorf("files.write was not refused %s: %.300s", call.code, answer)
			}
			if i > 0 {
				*call.ds = append(*call.ds, d)
			}
		}
		start := time.Now()
		if !json.Valid(big) {
			return 0, 0, fmt.Errorf("the payload arguments are not JSON")
		}
		if i > 0 {
			valids = append(valids, time.Since(start))
		}
	}
	return median(bigs) - median(smalls), median(valids), nil
}
