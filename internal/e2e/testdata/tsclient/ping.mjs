// The TypeScript SDK client, spawning serve: it starts a call the kernel
// holds, pings with a 1 s timeout while the call is held, says "pinged"
// (the test then lets the kernel answer the call), waits for the call's
// result and says "called". Any failure exits non-zero.
//
// usage: node ping.mjs SERVE_BINARY KERNEL_SOCKET
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [bin, socket] = process.argv.slice(2);
const client = new Client({ name: 'ts-ping-interop', version: '1' });
await client.connect(new StdioClientTransport({ command: bin, args: ['serve', '--integration', 'ts-sdk', '--socket', socket] }));
const held = client.callTool({ name: 'hold', arguments: {} }, undefined, { timeout: 60000 });
const start = Date.now();
await client.ping({ timeout: 1000 });
console.log(`pinged in ${Date.now() - start} ms`);
const result = await held;
console.log(`called ${result.isError ? 'error' : 'ok'}`);
await client.close();
