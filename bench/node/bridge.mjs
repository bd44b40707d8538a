// The relay benchmarks' TypeScript SDK peer: an MCP stdio server built on
// the official SDK's low-level Server, relaying each tools/call to a
// SharedOS kernel socket as NDJSON JSON-RPC (docs/kernel-protocol.md).
// Like `sharedos-mcp serve` it says integration.hello before reading stdin
// and fetches the catalogue on the first tools/list or tools/call; unlike
// it, it cannot check the kernel's peer credentials (Node has no
// SO_PEERCRED), does not hash the catalogue, and answers in completion
// order. Plain JavaScript so that it runs on Node 20 without a build step.
//
// Usage: node bridge.mjs --socket PATH [--integration NAME]
import net from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

function flag(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

// Kernel is one connection to the kernel: requests out, answers matched
// by id.
class Kernel {
  constructor(path) {
    this.nextId = 0;
    this.pending = new Map();
    this.buf = "";
    this.sock = net.createConnection(path);
    this.sock.setEncoding("utf8");
    this.sock.on("data", (chunk) => this.onData(chunk));
    this.sock.on("error", (err) => this.failAll(err));
    this.sock.on("close", () => this.failAll(new Error("kernel connection closed")));
  }

  onData(chunk) {
    this.buf += chunk;
    let nl;
    while ((nl = this.buf.indexOf("\n")) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (line.trim() === "") continue;
      const msg = JSON.parse(line);
      const p = this.pending.get(msg.id);
      if (!p) continue;
      this.pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`kernel refused: ${msg.error.message}`));
      else p.resolve(msg.result);
    }
  }

  failAll(err) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  request(method, params) {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.sock.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  }
}

const kernel = new Kernel(flag("--socket", ""));
const hello = await kernel.request("integration.hello", {
  name: flag("--integration", "bench"),
  shim: { name: "node-sdk-bench", version: "0" },
});
if (hello.protocol !== 1) throw new Error(`kernel speaks protocol ${hello.protocol}`);

let catalogue;
function load() {
  catalogue ??= kernel.request("tools.list", {}).then((res) => ({
    hash: res.catalogHash,
    tools: res.tools.map((t) => {
      const tool = { name: t.name, description: t.description, inputSchema: t.inputSchema };
      if (t.outputSchema) tool.outputSchema = t.outputSchema;
      if (t.annotations) tool.annotations = t.annotations;
      return tool;
    }),
  }));
  return catalogue;
}

const server = new Server({ name: "node-sdk-bench", version: "0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: (await load()).tools }));

let seq = 0;
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const { hash } = await load();
  const res = await kernel.request("tools.invoke", {
    callId: `c${++seq}`,
    tool: req.params.name,
    arguments: req.params.arguments ?? {},
    catalogHash: hash,
  });
  if (res.status !== "succeeded") {
    return { content: [{ type: "text", text: `${res.status}: ${res.code}: ${res.message}` }], isError: true };
  }
  if (Array.isArray(res.content)) return { content: res.content };
  return { content: [{ type: "text", text: JSON.stringify(res.output ?? null) }] };
});

// The SDK refuses messages over 10 MiB by default; serve and the Go SDK
// take lines up to 16 MiB, and so does this peer, so that all of them
// relay the same payloads.
const transport = new StdioServerTransport(process.stdin, process.stdout, { maxBufferSize: 16 * 1024 * 1024 });
transport.onclose = () => kernel.sock.end();
await server.connect(transport);
process.stdin.on("end", () => {
  kernel.sock.end();
  process.exit(0);
});
