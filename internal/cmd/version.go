package cmd

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/sharedos/sharedos-mcp/internal/cli"
)

func runVersion(_ context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "version", "", "Print one line: version, commit, build date, Go version and platform.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("run '"+prog+" version' without arguments", "version: unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(stdio.Out, versionLine(buildStamp(), runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH))
	return nil
}

// buildStamp is this binary's stamp: what -ldflags gave main, the rest
// from the toolchain's build information.
func buildStamp() stamp {
	bi, _ := debug.ReadBuildInfo()
	return resolveStamp(stamp{stamped.Version, stamped.Commit, stamped.Date}, bi)
}

// stamp is what identifies a build; an empty field is unknown.
type stamp struct{ version, commit, date string }

// resolveStamp fills the fields that ldflags left empty from bi, which
// may be nil. `go install module@v1.2.3` records the module version;
// `go build` in a checkout records the VCS revision, its commit time and
// whether the tree was modified. A version that is still unknown is
// "devel".
func resolveStamp(ld stamp, bi *debug.BuildInfo) stamp {
	s := ld
	if bi != nil {
		if s.version == "" && bi.Main.Version != "(devel)" {
			s.version = bi.Main.Version
		}
		var revision, modified, vcsTime string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				revision = kv.Value
			case "vcs.modified":
				modified = kv.Value
			case "vcs.time":
				vcsTime = kv.Value
			}
		}
		if s.commit == "" && revision != "" {
			s.commit = revision
			if modified == "true" {
				s.commit += "-dirty"
			}
		}
		if s.date == "" {
			s.date = vcsTime
		}
	}
	if s.version == "" {
		s.version = "devel"
	}
	return s
}

// versionLine is the one line `version` prints, e.g.
// "sharedos-mcp 1.2.0 (commit 3f9c…, built 2026-05-01T10:00:00Z, go1.26.0, linux/amd64)".
// Unknown commit and date are left out rather than printed as blanks.
func versionLine(s stamp, goVersion, platform string) string {
	var details []string
	if s.commit != "" {
		details = append(details, "commit "+s.commit)
	}
	if s.date != "" {
		details = append(details, "built "+s.date)
	}
	details = append(details, goVersion, platform)
	return fmt.Sprintf("%s %s (%s)", prog, s.version, strings.Join(details, ", "))
}
