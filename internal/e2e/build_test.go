package e2e

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testbin"
)

// maxBinarySize bounds the release binary: harnesses spawn it once per
// turn, and it is downloaded by every install. The official Go MCP SDK,
// which the kernel brokers upstreams with (issue 15), brought it from
// 6.9 to 11.8 MB: net/http, crypto/tls, jsonschema and the rest come with
// its mcp package. Remote upstreams (issue 25) took it from 12.3 to
// 13.4 MB: net/http's client transport and HTTP/2 (+0.34 MB), the SDK's
// Streamable HTTP client, its auth and oauthex packages and
// golang.org/x/oauth2 for kernel login, and the kernel's secret, webclient
// and oauth packages; with the CLI's second day it was 13.80 MB.
// Approvals (issue 26: the kernel's registry and questions, the shim's
// elicitation in both eras, the operator's commands) added 148 KB, to
// 13.95 MB. The OpenTelemetry SDK and its OTLP exporters (issue 27)
// added 10,158,080 bytes, from 13,959,330 to 24,117,410 (release flags,
// measured at the merge with the relay's budgets): protobuf, gRPC and
// the OTLP messages come with them, the HTTP exporters' included
// (docs/adr/0037).
const maxBinarySize = 24_300_000

// TestReleaseBuildIsStatic builds the binary the way goreleaser.yaml does
// and checks the promise that it runs on any Linux without a libc to
// match: no program interpreter and no shared libraries. It also checks
// that -X stamps reach the version command.
func TestReleaseBuildIsStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skipf("the static-linking check reads ELF; this is %s", runtime.GOOS)
	}
	if testing.Short() {
		t.Skip("builds the binary; skipped in -short mode")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build with")
	}
	bin := filepath.Join(t.TempDir(), "sharedos-mcp")
	build := exec.Command(goTool, "build", "-trimpath",
		"-ldflags", "-s -w -X main.version=9.9.9-test -X main.commit=abc123 -X main.date=2026-01-02T03:04:05Z",
		"-o", bin, "github.com/sharedos/sharedos-mcp")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("binary has a PT_INTERP program header: it is dynamically linked")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("read DT_NEEDED: %v", err)
	}
	if len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}

	info, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() >= maxBinarySize {
		t.Errorf("binary is %d bytes, want under %d", info.Size(), maxBinarySize)
	}
	t.Logf("static binary: %d bytes", info.Size())

	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("sharedos-mcp version: %v", err)
	}
	want := "sharedos-mcp 9.9.9-test (commit abc123, built 2026-01-02T03:04:05Z, "
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("version = %q, want it to start %q", out, want)
	}
}

// maxOwnInitBytes bounds what each of this module's packages allocates
// while it initializes. Every command pays for every package's init at
// every start, serve once per turn, so a package-level regexp, table or
// schema built at init is a cost on the path that matters least to it;
// such things are built on first use (sync.OnceValue). The largest today
// is kernel's table of the audit event's bounded fields, 2.5 KB.
const maxOwnInitBytes = 4096

// TestOwnPackagesInitCheaply runs the binary with GODEBUG=inittrace=1,
// in which the runtime reports each package's init as
// "init <package> @<t> ms, <d> ms clock, <n> bytes, <m> allocs", and
// holds this module's packages to maxOwnInitBytes. The bytes are the
// same on every run of one build, so the check cannot flake.
func TestOwnPackagesInitCheaply(t *testing.T) {
	cmd := exec.Command(testbin.Path(t), "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sharedos-mcp version: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 11 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/sharedos/sharedos-mcp") {
			continue
		}
		seen++
		n, err := strconv.Atoi(f[7])
		if err != nil || f[8] != "bytes," {
			t.Fatalf("cannot read the bytes of %q", line)
		}
		if n > maxOwnInitBytes {
			t.Errorf("%s allocates %d bytes at init, want at most %d: build it on first use", f[1], n, maxOwnInitBytes)
		}
	}
	if seen == 0 {
		t.Fatalf("no init lines of this module's packages in the output:\n%s", out)
	}
}
