// A bridge's WebSocket to relayd (docs/api.md "Bridge WebSocket"), for tests
// that play the bridge themselves: Node 18 has no WebSocket client, and this
// needs only RFC 6455's text frames, close, ping/pong and the relay's own
// {"type":"ping"}. Every update is acknowledged; each frame is kept in order.
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { waitFor } from './lib.js';

export class BridgeSocket {
  constructor(url, token) {
    this.url = url.replace(/^http/, 'ws');
    this.token = token;
    this.frames = [];
    this.socket = null;
    this.buffer = Buffer.alloc(0);
    this.closed = false;
  }

  open() {
    const u = new URL('/v1/bridge/ws', this.url.replace(/^ws/, 'http'));
    return new Promise((resolve, reject) => {
      const req = request({ host: u.hostname, port: u.port, path: u.pathname, headers: {
        Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'), Authorization: `Bearer ${this.token}`,
      } });
      req.on('upgrade', (res, socket, head) => {
        this.socket = socket;
        socket.on('data', (chunk) => this.read(chunk));
        socket.on('close', () => {
          this.closed = true;
        });
        if (head && head.length) this.read(head);
        resolve(this);
      });
      req.on('response', (res) => reject(new Error(`no upgrade: HTTP ${res.statusCode}`)));
      req.on('error', reject);
      req.end();
    });
  }

  read(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const b = this.buffer;
      if (b.length < 2) return;
      const opcode = b[0] & 0x0f;
      let len = b[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (b.length < 4) return;
        len = b.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        len = Number(b.readBigUInt64BE(2));
        at = 10;
      }
      if (b.length < at + len) return;
      const payload = b.subarray(at, at + len);
      this.buffer = b.subarray(at + len);
      if (opcode === 0x1) this.frame(JSON.parse(payload.toString('utf8')));
      else if (opcode === 0x9) this.raw(0xa, payload);
      else if (opcode === 0x8) this.socket.end();
    }
  }

  frame(f) {
    this.frames.push(f);
    if (f.type === 'ping') this.send({ type: 'pong' });
    if (f.type === 'update' && f.update) this.send({ type: 'ack', up_to_update_id: f.update.update_id });
  }

  raw(opcode, payload) {
    const mask = randomBytes(4);
    const len = payload.length;
    const head = len < 126 ? Buffer.from([0x80 | opcode, 0x80 | len])
      : len < 65536 ? Buffer.from([0x80 | opcode, 0x80 | 126, len >> 8, len & 0xff])
        : (() => {
          const h = Buffer.alloc(10);
          h[0] = 0x80 | opcode;
          h[1] = 0x80 | 127;
          h.writeBigUInt64BE(BigInt(len), 2);
          return h;
        })();
    const body = Buffer.from(payload);
    for (let i = 0; i < body.length; i++) body[i] ^= mask[i & 3];
    this.socket.write(Buffer.concat([head, mask, body]));
  }

  send(obj) {
    if (!this.closed) this.raw(0x1, Buffer.from(JSON.stringify(obj), 'utf8'));
  }

  updates(type) {
    return this.frames.filter((f) => f.type === 'update' && (!type || f.update.type === type)).map((f) => f.update);
  }

  // The first update of this type (and matching `match`) after the first `skip` of them.
  async update(type, match = () => true, timeout) {
    return waitFor(`the bridge's update ${type}`, () => this.updates(type).find((u) => match(u.payload || {}, u)), timeout);
  }

  close() {
    if (this.socket && !this.closed) {
      this.raw(0x8, Buffer.from([0x03, 0xe8]));
      this.socket.end();
    }
  }
}
