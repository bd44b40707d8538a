package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sharedos/sharedos-mcp/internal/cli"
	"github.com/sharedos/sharedos-mcp/internal/clip"
	"github.com/sharedos/sharedos-mcp/internal/doctor"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/kernelclient"
)

// The operator's side of approvals (docs/approvals.md): what waits, and a
// decision on one, asked of the running kernel over its socket as its
// operator. The kernel records each decision before it takes effect;
// these commands only ask.

const approvalsSummary = "List the calls the running kernel holds until a person approves them (a grant's ask):\n" +
	"each one's approval id, integration, tool, resource, arguments (a preview) and age. Decide one\n" +
	"with 'sharedos-mcp approve ID' or 'sharedos-mcp deny ID'. Only the kernel's operator may ask:\n" +
	"its own uid, root when it serves root, or a uid in its operator_uids."

func runApprovals(ctx context.Context, stdio cli.IO, args []string) error {
	fs := newFlagSet(stdio, "approvals", "[flags]", approvalsSummary)
	asJSON := fs.Bool("json", false, "print the list as JSON")
	socket := fs.String("socket", "", "kernel socket `path` (default as for serve)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.Usagef("run 'sharedos-mcp approve ID' or 'sharedos-mcp deny ID' to decide one", "approvals: unexpected argument %q", pos[0])
	}
	var list []kproto.Approval
	err = atKernelAsOperator(ctx, "approvals", *socket, func(ctx context.Context, k *kernelclient.Client) (err error) {
		list, err = k.Approvals(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(kproto.ApprovalsListResult{Approvals: list})
	}
	if len(list) == 0 {
		fmt.Fprintln(stdio.Out, "no call waits for approval")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdio.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tINTEGRATION\tTOOL\tRESOURCE\tARGUMENTS\tAGE\tWHO MAY APPROVE")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(a.ID), cell(a.Integration), cell(a.Tool), cell(clip.String(a.Resource, 60)),
			cell(clip.String(a.Arguments, 48)), age(now, a.RequestedAt), whoMayApprove(a.Ask))
	}
	return tw.Flush()
}

func whoMayApprove(ask string) string {
	if ask == "harness" {
		return "harness or operator"
	}
	return "operator"
}

// age is how long ago an RFC 3339 time was, in whole seconds at least.
func age(now time.Time, at string) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return "-"
	}
	return max(now.Sub(t).Truncate(time.Second), 0).String()
}

func runApprove(ctx context.Context, stdio cli.IO, args []string) error {
	return decideApproval(ctx, stdio, args, true)
}

func runDeny(ctx context.Context, stdio cli.IO, args []string) error {
	return decideApproval(ctx, stdio, args, false)
}

// decideApproval is approve (approve) and deny: one decision on one
// approval, which the kernel records before the call it holds runs or is
// refused. The first decision wins, the harness's person's or the
// operator's; the other is told.
func decideApproval(ctx context.Context, stdio cli.IO, args []string, approve bool) error {
	name, verb := "deny", "Decline"
	if approve {
		name, verb = "approve", "Approve"
	}
	fs := newFlagSet(stdio, name, "ID [flags]", verb+" the call the running kernel holds under approval ID, as its operator: 'sharedos-mcp approvals'\n"+
		"lists what waits. An approved call runs once, with exactly the arguments shown, when it is\n"+
		"retried (or at once, if it still waits); a declined one is refused approval_declined.")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	socket := fs.String("socket", "", "kernel socket `path` (default as for serve)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return cli.Usagef("'sharedos-mcp approvals' lists the ids of what waits", "%s: missing ID", name)
	case len(pos) > 1:
		return cli.Usagef("decide one approval at a time", "%s: unexpected argument %q", name, pos[1])
	}
	var r kproto.ApprovalDecideResult
	err = atKernelAsOperator(ctx, name, *socket, func(ctx context.Context, k *kernelclient.Client) (err error) {
		if approve {
			r, err = k.Approve(ctx, pos[0])
		} else {
			r, err = k.Deny(ctx, pos[0])
		}
		return err
	})
	var ke *kernelclient.KernelError
	switch {
	case errors.As(err, &ke) && ke.Code == kproto.ErrUnknownApproval:
		return cli.Hintf(fmt.Errorf("%s: %s", name, ke.RPC.Message), "'sharedos-mcp approvals' lists what waits now; a call that is retried after its approval expired asks again")
	case errors.As(err, &ke) && ke.Code == kproto.ErrApprovalDecided:
		return cli.Hintf(fmt.Errorf("%s: %s", name, ke.RPC.Message), "the first decision stands; the call is asked for again only when it is made again")
	case err != nil:
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	if approve {
		fmt.Fprintf(stdio.Out, "approved %s: %s by %s on %s, for one call with exactly the arguments shown, until %s\n",
			r.ID, cell(r.Tool), cell(r.Integration), cell(r.Resource), r.ApprovedUntil)
		fmt.Fprintln(stdio.Out, "the call runs now if it still waits, else when it is retried")
		return nil
	}
	fmt.Fprintf(stdio.Out, "declined %s: %s by %s on %s is refused approval_declined\n", r.ID, cell(r.Tool), cell(r.Integration), cell(r.Resource))
	return nil
}

// atKernelAsOperator runs f on a connection to the kernel at socket (or
// the default), as its operator, and explains why it could not: no
// kernel, or a uid the kernel does not serve as operator.
func atKernelAsOperator(ctx context.Context, name, socket string, f func(context.Context, *kernelclient.Client) error) error {
	path := socket
	if path == "" {
		path = sockpath.Default(os.Getenv)
	}
	k, err := kernelclient.Dial(kernelclient.Options{Socket: path, KernelUID: -1})
	if err != nil {
		return fmt.Errorf("%s: %w", name, doctor.DialError(path, startKernel("", socket),
			"run '"+prog+" "+name+"' again (approvals live in the running kernel)", err))
	}
	defer k.Close()
	cctx, cancel := context.WithTimeout(ctx, doctor.HelloTimeout)
	defer cancel()
	err = f(cctx, k)
	var ke *kernelclient.KernelError
	switch {
	case errors.As(err, &ke) && ke.Code == kproto.ErrOperatorOnly:
		return cli.Hintf(fmt.Errorf("%s: the kernel at %s refused: %s", name, path, ke.RPC.Message),
			"only the kernel's operator may see or decide approvals: run this as the kernel's own uid, or add your uid to operator_uids in its config")
	case errors.As(err, &ke) && (ke.Code == kproto.ErrUnknownApproval || ke.Code == kproto.ErrApprovalDecided):
		return err
	case err != nil:
		return cli.Hintf(fmt.Errorf("%s: the kernel at %s: %w", name, path, err), "%s", doctor.DialHint(err))
	}
	return nil
}

// approvalEventStatus is what an approval record shows in the audit's
// status column.
func approvalEventStatus(event, id, ask, by, expires string, uid uint32) string {
	switch {
	case strings.HasSuffix(event, ".requested"):
		return fmt.Sprintf("%s asks %s until %s", id, whoMayApprove(ask), shortTime(expires))
	case by == "operator":
		return fmt.Sprintf("%s by the operator (uid %d)", id, uid)
	}
	return id + " by the person at the harness"
}
