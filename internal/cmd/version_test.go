package cmd

import (
	"runtime/debug"
	"testing"
)

func TestResolveStamp(t *testing.T) {
	checkout := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/sharedos/sharedos-mcp", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "3f9c2e1d"},
			{Key: "vcs.time", Value: "2026-05-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	dirty := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/sharedos/sharedos-mcp", Version: "v0.3.1-0.20260501100000-3f9c2e1d+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "3f9c2e1d"},
			{Key: "vcs.time", Value: "2026-05-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	goInstall := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/sharedos/sharedos-mcp", Version: "v1.2.0"},
	}
	tests := []struct {
		name string
		ld   stamp
		bi   *debug.BuildInfo
		want stamp
	}{
		{"ldflags win over build info", stamp{"1.2.0", "abc123", "2026-06-01T00:00:00Z"}, checkout, stamp{"1.2.0", "abc123", "2026-06-01T00:00:00Z"}},
		{"go install records the module version only", stamp{}, goInstall, stamp{"v1.2.0", "", ""}},
		{"a build in a checkout takes revision and commit time", stamp{}, checkout, stamp{"devel", "3f9c2e1d", "2026-05-01T10:00:00Z"}},
		{"a modified tree marks the commit dirty", stamp{}, dirty, stamp{"v0.3.1-0.20260501100000-3f9c2e1d+dirty", "3f9c2e1d-dirty", "2026-05-01T10:00:00Z"}},
		{"ldflags fill some fields, build info the others", stamp{version: "1.2.0"}, checkout, stamp{"1.2.0", "3f9c2e1d", "2026-05-01T10:00:00Z"}},
		{"no build info at all is devel", stamp{}, nil, stamp{"devel", "", ""}},
		{"build info without version or VCS is devel", stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, stamp{"devel", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolveStamp(tt.ld, tt.bi); got != tt.want {
				t.Errorf("resolveStamp() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVersionLine(t *testing.T) {
	tests := []struct {
		name string
		s    stamp
		want string
	}{
		{"a release names everything", stamp{"1.2.0", "3f9c2e1d", "2026-05-01T10:00:00Z"}, "sharedos-mcp 1.2.0 (commit 3f9c2e1d, built 2026-05-01T10:00:00Z, go1.26.0, linux/arm64)"},
		{"a devel build leaves out what it does not know", stamp{version: "devel"}, "sharedos-mcp devel (go1.26.0, linux/arm64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionLine(tt.s, "go1.26.0", "linux/arm64"); got != tt.want {
				t.Errorf("versionLine() = %q, want %q", got, tt.want)
			}
		})
	}
}
