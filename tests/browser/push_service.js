// A push service for the tests, on loopback: it hands out subscriptions
// (a P-256 key pair and an auth secret of its own, as a browser would make),
// and for every message relayd posts it checks what RFC 8030, 8291 and 8292
// ask (the VAPID token's signature, audience and expiry, the aes128gcm
// header) and decrypts the payload, written here with node:crypto alone, so
// it shares no code with the relay's C.
import { createServer } from 'node:http';
import crypto from 'node:crypto';

const b64url = (buf) => Buffer.from(buf).toString('base64url');

function verifyVapid(header, expectedKey, origin) {
  const m = /^vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/.exec(header || '');
  if (!m) throw new Error(`Authorization is not "vapid t=..., k=...": ${header}`);
  const [, jwt, k] = m;
  if (expectedKey && k !== expectedKey) throw new Error('k= is not the relay\'s VAPID key');
  const point = Buffer.from(k, 'base64url');
  if (point.length !== 65 || point[0] !== 4) throw new Error('k= is not an uncompressed P-256 point');
  const key = crypto.createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: b64url(point.subarray(1, 33)), y: b64url(point.subarray(33)) },
    format: 'jwk',
  });
  const [h, p, s] = jwt.split('.');
  const head = JSON.parse(Buffer.from(h, 'base64url'));
  if (head.alg !== 'ES256') throw new Error(`VAPID alg ${head.alg}`);
  const ok = crypto.verify('sha256', Buffer.from(`${h}.${p}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'));
  if (!ok) throw new Error('the VAPID signature does not verify');
  const claims = JSON.parse(Buffer.from(p, 'base64url'));
  const now = Math.floor(Date.now() / 1000);
  if (claims.aud !== origin) throw new Error(`aud ${claims.aud}, expected ${origin}`);
  if (!(claims.exp > now && claims.exp <= now + 24 * 3600 + 60)) throw new Error(`exp ${claims.exp} out of range`);
  if (!/^(mailto:|https?:)/.test(claims.sub || '')) throw new Error(`sub ${claims.sub}`);
  return claims;
}

function decrypt(body, subscription) {
  const salt = body.subarray(0, 16);
  const rs = body.readUInt32BE(16);
  const idlen = body[20];
  const senderKey = body.subarray(21, 21 + idlen);
  const ciphertext = body.subarray(21 + idlen);
  if (idlen !== 65 || rs < 18) throw new Error(`header: idlen ${idlen}, rs ${rs}`);
  if (ciphertext.length > rs) throw new Error('more than one record');
  const secret = subscription.ecdh.computeSecret(senderKey);
  const info = Buffer.concat([Buffer.from('WebPush: info\0'), subscription.publicKey, senderKey]);
  const ikm = Buffer.from(crypto.hkdfSync('sha256', secret, subscription.auth, info, 32));
  const cek = Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(crypto.hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const decipher = crypto.createDecipheriv('aes-128-gcm', cek, nonce);
  decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
  const padded = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()]);
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end -= 1;
  if (padded[end] !== 2) throw new Error('the last record does not end with the 0x02 delimiter');
  return padded.subarray(0, end).toString('utf8');
}

export class PushService {
  constructor() {
    this.subscriptions = new Map();
    this.failures = [];
    this.vapidKey = null;
  }

  async start() {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() {
    return new Promise((resolve) => this.server.close(resolve));
  }

  // A subscription as PushSubscription.toJSON() gives it.
  subscribe(name) {
    const ecdh = crypto.createECDH('prime256v1');
    const publicKey = ecdh.generateKeys();
    const auth = crypto.randomBytes(16);
    const id = crypto.randomBytes(12).toString('hex');
    const subscription = { name, id, ecdh, publicKey, auth, messages: [], requests: [], status: 201 };
    this.subscriptions.set(id, subscription);
    return { endpoint: `${this.origin}/push/${id}`, expirationTime: null, keys: { p256dh: b64url(publicKey), auth: b64url(auth) } };
  }

  byName(name) {
    return [...this.subscriptions.values()].find((s) => s.name === name);
  }

  // The decrypted messages a subscription received, parsed.
  messages(name) {
    return this.byName(name).messages;
  }

  // What the service answers to this subscription's next posts (410: gone for good).
  answer(name, status) {
    this.byName(name).status = status;
  }

  handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const m = /^\/push\/([0-9a-f]+)$/.exec(req.url);
      const subscription = m && this.subscriptions.get(m[1]);
      if (req.method !== 'POST' || !subscription) {
        res.writeHead(404).end();
        return;
      }
      const record = { headers: req.headers, at: Date.now() };
      subscription.requests.push(record);
      if (subscription.status !== 201) {
        res.writeHead(subscription.status).end();
        return;
      }
      try {
        if (req.headers['content-encoding'] !== 'aes128gcm') throw new Error(`Content-Encoding ${req.headers['content-encoding']}`);
        if (!/^\d+$/.test(req.headers.ttl || '')) throw new Error(`TTL ${req.headers.ttl}`);
        record.vapid = verifyVapid(req.headers.authorization, this.vapidKey, this.origin);
        const body = Buffer.concat(chunks);
        if (body.length > 4096) throw new Error(`body of ${body.length} bytes`);
        subscription.messages.push({ ...JSON.parse(decrypt(body, subscription)), urgency: req.headers.urgency,
          ttl: Number(req.headers.ttl) });
        res.writeHead(201, { Location: `${this.origin}/message/${crypto.randomBytes(6).toString('hex')}` }).end();
      } catch (err) {
        this.failures.push(err.message);
        res.writeHead(400).end(err.message);
      }
    });
  }
}
