package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/catalog"
	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

func runCatalog(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "catalog", "[--harness H|all] [--integration NAME] [flags]",
		"Connect to the kernel as an integration, fetch its catalogue (checking the catalogHash as\n"+
			"serve does) and print every tool with the name each harness shows its model for it,\n"+
			"flagging names a harness rewrites, truncates, hashes or gives two tools alike.\n"+
			"The catalogue is per integration: --integration defaults to the harness id when --harness\n"+
			"names one harness (what 'install' announces), and must be given with --harness all.\n"+
			"Each run is one turn at the kernel, recorded in its audit log.\n"+
			"Brokered tools (those of [[upstream]] servers) are listed again with the action and resource a\n"+
			"call needs and the grants of the kernel's config that publish them, and the upstreams' tools\n"+
			"that are not published (quarantined, misconfigured) with why.\n"+
			"Harnesses: "+harnessList+".")
	harness := fs.String("harness", "all", "show aliases for this `harness`, or all of them")
	integration := fs.String("integration", "", "integration `name` to fetch the catalogue for (default: the harness id)")
	socket := fs.String("socket", "", "kernel socket `path` (default $SHAREDOS_SOCKET, else $XDG_RUNTIME_DIR/sharedos/kernel.sock, else $TMPDIR/sharedos-$UID/kernel.sock)")
	asJSON := fs.Bool("json", false, "print one JSON document instead of tables")
	configFile := fs.String("config", "", "the kernel's TOML config `file`, to name the grants behind brokered tools (default as the kernel's)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("catalog takes flags only", "catalog: unexpected argument %q", fs.Arg(0))
	}
	harnesses := install.Harnesses()
	if *harness != "all" {
		if _, err := lookupHarness("catalog", *harness); err != nil {
			return err
		}
		harnesses = []string{*harness}
	}
	name := *integration
	if name == "" {
		if *harness == "all" {
			return cli.Usagef("name the integration, e.g. --integration claude-code, or one harness with --harness", "catalog: --integration is required with --harness all")
		}
		name = *harness
	}
	if err := integrationName("catalog", name); err != nil {
		return err
	}
	path := *socket
	if path == "" {
		path = sockpath.Default(os.Getenv)
	}

	k, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: -1})
	if err != nil {
		return doctor.DialError(path, startKernel(*configFile, path), "run '"+prog+" catalog' again", err)
	}
	defer k.Close()
	cctx, cancel := context.WithTimeout(ctx, doctor.HelloTimeout)
	defer cancel()
	hello, err := k.Hello(cctx, kproto.HelloParams{Name: name, Shim: kproto.Peer{Name: prog + " catalog", Version: shimVersion()}})
	if err != nil {
		return doctor.HelloError(path, err)
	}
	tools, defs, hash, err := k.CatalogueDefinitions(cctx)
	if err != nil {
		return cli.Hintf(fmt.Errorf("catalog: %w", err), "serve refuses this catalogue too; check the kernel's tool definitions and its log")
	}
	view := catalog.New(name, hello, hash, tools, harnesses)
	addBrokered(view, tools, defs, *configFile)
	if *asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return view.Print(stdio.Out)
}
