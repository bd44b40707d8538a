'use strict';
// Preloaded (node --require) into the bridge by go run ./conformance/mcp.
// supergateway has no host option and listens on every interface; this
// makes a listen on a bare port listen on 127.0.0.1 instead, so nothing
// the run starts is reachable from another machine. It also prints the
// port each such server got, so the runner can pass --port 0 and read the
// real port back instead of guessing a free one.
const net = require('node:net');

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const barePort =
    typeof args[0] === 'number' &&
    (args.length === 1 || typeof args[1] === 'function');
  if (barePort) {
    args.splice(1, 0, '127.0.0.1');
    this.once('listening', () => {
      const { address, port } = this.address();
      process.stderr.write(`loopback: listening on ${address}:${port}\n`);
    });
  }
  return listen.apply(this, args);
};
