// The TypeScript SDK client, spawning serve, with an elicitation handler:
// the reference kernel holds files.write until a person approves it, and
// the shim asks through elicitation/create. The handler says what it was
// asked (the first line of the question), approves the first call and
// declines the second; each call's outcome is said. Any failure exits
// non-zero.
//
// usage: node elicit.mjs SERVE_BINARY KERNEL_SOCKET
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [bin, socket] = process.argv.slice(2);
const client = new Client({ name: 'ts-elicit-interop', version: '1' }, { capabilities: { elicitation: {} } });
let approve = true;
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  console.log(`asked: ${request.params.message.split('\n')[0]}`);
  return { action: 'accept', content: { approve } };
});
await client.connect(new StdioClientTransport({ command: bin, args: ['serve', '--integration', 'ts-sdk', '--socket', socket] }));

const say = (what, result) => {
  if (!result.isError) {
    console.log(`${what}: ok`);
    return;
  }
  console.log(`${what}: error ${result._meta?.['sharedos/code']}`);
};
say('approve', await client.callTool({ name: 'files.write', arguments: { path: '/public/ts-yes.txt', content: 'from typescript' } }, undefined, { timeout: 60000 }));
approve = false;
say('decline', await client.callTool({ name: 'files.write', arguments: { path: '/public/ts-no.txt', content: 'no' } }, undefined, { timeout: 60000 }));
await client.close();
