// Command sharedos-mcp gives AI coding harnesses a tool catalogue that a
// host kernel decides and authorizes, call by call. Its commands live in
// internal/cmd.
package main

import (
	"os"

	"github.com/sharedos/sharedos-mcp/internal/cmd"
	"github.com/sharedos/sharedos-mcp/kernel/upstream"
)

// version, commit and date are stamped by releases and `make build` with
// -ldflags "-X main.version=… -X main.commit=… -X main.date=…".
var version, commit, date string

func main() {
	// The kernel runs each brokered upstream under a copy of this binary
	// acting as its supervisor (docs/adr/0014); that copy stops here.
	upstream.MaybeSupervise()
	os.Exit(cmd.Main(cmd.Build{Version: version, Commit: commit, Date: date}))
}
