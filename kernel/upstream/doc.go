// Package upstream brokers stdio MCP servers ("upstreams") for the
// reference kernel: it starts each configured server, keeps it running,
// pins the definitions of its tools, and forwards calls to it. It decides
// nothing about authority: the kernel asks Tool.Resolve which resource a
// call acts on, authorizes it with its grants, and only then calls
// Manager.Call with the arguments that same resolution produced. It never imports package kernel.
//
// The kernel uses it in five places:
//
//   - Config: embed []Config as the `upstream` key of its TOML document,
//     decode with unknown keys refused, then Parse, which returns one
//     Spec per upstream or a *ConfigError naming the [[upstream]] (and
//     [[upstream.tool]]) table and key; Locate turns that into a line.
//   - Start: Start(specs, Options) once, with the state directory that
//     holds the pins file and an OnEvent that audits EventToolPinned and
//     EventToolQuarantined. The program must call MaybeSupervise first
//     thing in main: each upstream runs under a copy of it acting as
//     supervisor, so that nothing an upstream spawned outlives the kernel.
//     Close on shutdown (SIGTERM, SIGINT).
//   - A turn's catalogue: Snapshot once per turn. Snapshot.Tools are the
//     tools to offer, each with Definition() for the catalogue and Action
//     and Resource (a policy.Template) for discoverability; Withheld says
//     why the others are not offered; Upstreams is each one's Status.
//   - A call: Tool.Resolve(arguments) reads the arguments once and
//     returns the resource to authorize and the Forward to send (an error
//     wraps ErrInvalidArguments); Manager.Call(ctx, tool, forward,
//     progress) sends exactly those bytes and returns the upstream's
//     content and structuredContent, or a *CallError with one of the Code
//     constants.
//   - Approval: Approve(stateDir, upstream, tool, sha256) pins what is
//     quarantined, from another process, and with sha256 only the
//     definition of that hash (a *NotReviewedError otherwise); the Manager hands the approval
//     to Options.RecordApproval at its next Snapshot (or when it starts)
//     and publishes the tool only once that recorded it. Quarantined
//     lists what awaits approval.
//
// docs/adr/0013 says what is pinned and why; docs/adr/0014 how upstream
// processes are started and ended.
package upstream
