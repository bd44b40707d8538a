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
