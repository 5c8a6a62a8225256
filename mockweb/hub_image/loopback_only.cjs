// Preloaded into every mock app the supervisor starts (NODE_OPTIONS=--require): a TCP server the
// app opens answers only connections from the hub container's own loopback. The apps bind `::`
// (both families, what `hub check` asks of them), which without this puts each app's State API
// on the hub's networks past the front door, where a rollout's key is asked (docs/integrity.md):
// a fork that found an app's internal port could write its rollout's state directly. A
// connection from any other address is closed before its first byte is read.
'use strict';
const net = require('node:net');

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/;
const listen = net.Server.prototype.listen;
const GUARDED = Symbol('shinken.loopbackOnly');

net.Server.prototype.listen = function listenOnLoopbackOnly(...args) {
  if (!this[GUARDED]) {
    this[GUARDED] = true;
    // First listener: runs before http's own, so no parser ever sees a foreign socket's data.
    this.prependListener('connection', (socket) => {
      const from = socket.remoteAddress;  // undefined for a Unix socket (not reachable from a fork)
      if (from !== undefined && !LOOPBACK.test(from)) socket.destroy();
    });
  }
  return listen.apply(this, args);
};
