package kernelclient

import (
	"context"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// Explain asks the kernel, as its operator, how it would decide a call
// now (kernel.explain). The connection must not have said hello: an
// operator's connection is one that has not, from a uid the kernel
// serves as operator; any other is refused with a *KernelError of code
// kproto.ErrOperatorOnly.
func (c *Client) Explain(ctx context.Context, p kproto.ExplainParams) (kproto.ExplainResult, error) {
	var r kproto.ExplainResult
	err := c.call(ctx, kproto.MethodExplain, p, &r)
	return r, err
}

// Approvals lists the calls that wait for a person's approval
// (approvals.list), oldest first, as the kernel's operator.
func (c *Client) Approvals(ctx context.Context) ([]kproto.Approval, error) {
	var r kproto.ApprovalsListResult
	err := c.call(ctx, kproto.MethodApprovalsList, struct{}{}, &r)
	return r.Approvals, err
}

// Approve approves the call that waits under approval id (approvals.approve),
// as the kernel's operator. A *KernelError of code
// kproto.ErrUnknownApproval or kproto.ErrApprovalDecided says why it was
// not: an id that waits for nothing, or a decision made first.
func (c *Client) Approve(ctx context.Context, id string) (kproto.ApprovalDecideResult, error) {
	var r kproto.ApprovalDecideResult
	err := c.call(ctx, kproto.MethodApprovalsApprove, kproto.ApprovalDecideParams{ID: id}, &r)
	return r, err
}

// Deny declines it (approvals.deny), as Approve approves it.
func (c *Client) Deny(ctx context.Context, id string) (kproto.ApprovalDecideResult, error) {
	var r kproto.ApprovalDecideResult
	err := c.call(ctx, kproto.MethodApprovalsDeny, kproto.ApprovalDecideParams{ID: id}, &r)
	return r, err
}
