package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/nearest"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernel"
	"github.com/sharedos/sharedos-mcp/kernelclient"
	"github.com/sharedos/sharedos-mcp/policy"
)

func runKernelExplain(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "kernel explain", "--integration NAME TOOL [ARGUMENTS-JSON] [flags]",
		"Decide one call exactly as the kernel would, now, without running it or calling any upstream:\n"+
			"the resource and action the arguments name and, at every level of the integration's chain\n"+
			"(the integration, then each parent), the grant that allows it. Exits 0 when the kernel would\n"+
			"run it; exits 1 when it would not, and lists, for each grant of the integration and of each\n"+
			"ancestor, the first condition it failed (subject, namespace, resource, descendants, action,\n"+
			"expiry, limit, ask), nearest first, and why a tool is not in the catalogue. It asks the running\n"+
			"kernel (its grants, its upstreams' tools and its limits' counts) as its operator; with no kernel\n"+
			"at the socket it decides from the config and says what it could not know.")
	integration := fs.String("integration", "", "the integration `name` whose call it is (required)")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	configFile := fs.String("config", "", configHelp+"; read only when no kernel answers")
	root := fs.String("root", "", "files root `dir`, as you would pass it to the kernel; read only when no kernel answers")
	socket := fs.String("socket", "", "kernel socket `path` (default as for serve)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	const usage = "give the tool and, optionally, its arguments as one JSON object, e.g. kernel explain --integration claude-code files.read '{\"path\":\"/docs/a.md\"}'"
	switch {
	case *integration == "":
		return cli.Usagef(usage, "kernel explain: --integration is required")
	case len(pos) == 0:
		return cli.Usagef(usage, "kernel explain: missing TOOL")
	case len(pos) > 2:
		return cli.Usagef(usage, "kernel explain: unexpected argument %q", pos[2])
	}
	if err := integrationName("kernel explain", *integration); err != nil {
		return err
	}
	p := kproto.ExplainParams{Integration: *integration, Tool: pos[0]}
	if len(pos) == 2 {
		var v map[string]json.RawMessage
		if err := json.Unmarshal([]byte(pos[1]), &v); err != nil || v == nil {
			return cli.Usagef(usage, "kernel explain: the arguments %q are not a JSON object", pos[1])
		}
		p.Arguments = json.RawMessage(pos[1])
	}
	path := *socket
	if path == "" {
		path = sockpath.Default(os.Getenv)
	}
	from := "kernel"
	r, unreachable, err := explainAtKernel(ctx, path, p)
	if err != nil {
		return err
	}
	if unreachable != "" {
		from = "config"
		if r, err = explainFromConfig(*configFile, *root, p); err != nil {
			return err
		}
		r.Notes = append([]string{unreachable}, r.Notes...)
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			From string `json:"from"`
			kproto.ExplainResult
		}{from, r}); err != nil {
			return err
		}
	} else {
		printExplain(stdio.Out, r, from)
	}
	if !r.Allowed {
		return cli.Hintf(fmt.Errorf("kernel explain: the kernel would not run %s for %s (%s)", r.Tool, r.Chain[0], r.Code), "%s", explainHint(r))
	}
	return nil
}

// explainHint says what would let the call run.
func explainHint(r kproto.ExplainResult) string {
	switch {
	case r.Code == kproto.CodeRateLimited:
		return "wait for the limit's window to end, or raise the grant's limit and reload the kernel"
	case r.Code == kproto.CodeApprovalRequired:
		return "the kernel holds each such call until a person approves it ('sharedos-mcp approvals' lists what waits); a grant without ask would let it run unasked"
	case r.Unavailable == kproto.UnavailableQuarantined:
		return "'sharedos-mcp doctor' shows why it is withheld"
	case r.Unavailable == kproto.UnavailableUpstreamNotReady:
		return "'sharedos-mcp doctor' shows the upstream's state and its last lines of stderr"
	case r.Unavailable == kproto.UnavailableNotRegistered:
		return "'sharedos-mcp catalog --integration " + r.Chain[0] + "' lists the tools it has"
	case r.Code == kproto.CodeInvalidArguments:
		return "fix the arguments as the message says"
	}
	return "change or add a grant for each level named above, then check it with 'sharedos-mcp kernel check'"
}

// explainAtKernel asks the kernel at path. When none can be reached,
// unreachable says why (and the caller decides from the config); a
// kernel that refuses is an error.
func explainAtKernel(ctx context.Context, path string, p kproto.ExplainParams) (r kproto.ExplainResult, unreachable string, err error) {
	k, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: -1})
	switch {
	case errors.Is(err, iofs.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return r, fmt.Sprintf("no kernel is running at %s: decided from the config, with the limits' counts it last saved", path), nil
	case err != nil:
		return r, fmt.Sprintf("no kernel answered at %s (%s): decided from the config, with the limits' counts it last saved", path, cli.Words(err)), nil
	}
	defer k.Close()
	cctx, cancel := context.WithTimeout(ctx, doctor.HelloTimeout)
	defer cancel()
	r, err = k.Explain(cctx, p)
	var ke *kernelclient.KernelError
	switch {
	case errors.As(err, &ke) && ke.Code == kproto.ErrOperatorOnly:
		return r, "", cli.Hintf(fmt.Errorf("kernel explain: the kernel at %s refused: %w", path, err),
			"only the kernel's operator may ask it: run this as the kernel's own uid, or add your uid to operator_uids in its config")
	case err != nil:
		return r, "", cli.Hintf(fmt.Errorf("kernel explain: the kernel at %s: %w", path, err), "%s", doctor.DialHint(err))
	}
	return r, "", nil
}

// explainFromConfig decides p from the config the kernel would run on.
func explainFromConfig(configFile, root string, p kproto.ExplainParams) (kproto.ExplainResult, error) {
	cfg, err := loadKernelConfig(configFile, root)
	if err != nil {
		return kproto.ExplainResult{}, err
	}
	stateDir, _ := cfg.StateDirOrDefault(os.Getenv)
	return kernel.ExplainFromConfig(cfg, stateDir, p, time.Now())
}

// printExplain shows an explanation as people read it.
func printExplain(w io.Writer, r kproto.ExplainResult, from string) {
	who := r.Chain[0]
	if len(r.Chain) > 1 {
		who += " (child of " + strings.Join(r.Chain[1:], ", child of ") + ")"
	}
	source := "the running kernel"
	if from != "kernel" {
		source = "the config"
	}
	fmt.Fprintf(w, "%s by %s, decided by %s\n", r.Tool, who, source)
	if r.Resource != "" {
		fmt.Fprintf(w, "resource %s, action %s\n", r.Resource, r.Action)
	}
	file := r.Config
	if file == "" {
		file = "the built-in config"
	}
	switch {
	case r.Allowed:
		fmt.Fprintf(w, "allowed by grants of %s:\n", file)
	case r.Code == kproto.CodeApprovalRequired:
		fmt.Fprintf(w, "needs approval by %s before it runs (%s: the kernel holds the call and asks), allowed by grants of %s:\n", askWho(r.Ask), r.Code, file)
	default:
		fmt.Fprintf(w, "%s %s: %s\n", r.Status, r.Code, r.Message)
	}
	if r.Unavailable != "" {
		fmt.Fprintf(w, "not in the catalogue of %s: %s (%s)\n", r.Chain[0], r.UnavailableDetail, r.Unavailable)
	}
	if len(r.Grants) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  LEVEL\tGRANT\tASK")
		for _, g := range r.Grants {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", g.Integration, explainGrantLabel(r, g), orDash(g.Ask))
		}
		tw.Flush()
	}
	if len(r.Checks) > 0 {
		printChecks(w, r, file)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// printChecks lists each grant's first failed condition, nearest first.
// A grant for another integration (failed subject) is listed only when
// its subject is a likely typo of the level's name; the others are
// counted, and a level no grant names says so.
func printChecks(w io.Writer, r kproto.ExplainResult, file string) {
	fmt.Fprintf(w, "grants of %s, nearest first:\n", file)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEVEL\tGRANT\tFAILED\tWHY")
	others := 0
	named := map[string]bool{}
	for _, g := range r.Checks {
		if g.Failed == string(policy.CondSubject) && !likelyTypo(g) {
			others++
			continue
		}
		named[g.Integration] = named[g.Integration] || g.Failed != string(policy.CondSubject)
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", g.Integration, explainGrantLabel(r, g), orDash(g.Failed), g.Detail)
	}
	for _, level := range r.Chain {
		if !named[level] {
			fmt.Fprintf(tw, "  %s\t-\tsubject\tno grant's subject is integration:%s or integration:*\n", level, level)
		}
	}
	tw.Flush()
	if others > 0 {
		fmt.Fprintf(w, "  and %d grant(s) whose subject is another integration\n", others)
	}
}

// likelyTypo reports whether a grant that failed on its subject names an
// integration whose name is a likely misspelling of the level's
// (integration:claude_code for claude-code), not merely another
// integration that shares a prefix with it.
func likelyTypo(g kproto.ExplainGrant) bool {
	_, subject, ok := strings.Cut(g.Detail, "is for integration:")
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(subject, ",")
	d := len(name) - len(g.Integration)
	return name != "*" && d >= -2 && d <= 2 && nearest.Find(name, nearest.Names(g.Integration)) != ""
}

func explainGrantLabel(r kproto.ExplainResult, g kproto.ExplainGrant) string {
	switch {
	case r.Config == "":
		return fmt.Sprintf("#%d (built in)", g.Grant)
	case g.Line > 0:
		return fmt.Sprintf("#%d, line %d", g.Grant, g.Line)
	}
	return fmt.Sprintf("#%d", g.Grant)
}

func askWho(a string) string {
	if a == policy.AskOperator {
		return "the operator"
	}
	return "a person at the harness, or the operator"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
