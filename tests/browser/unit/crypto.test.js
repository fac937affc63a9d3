// web/app/crypto.js against the protocol authors' published vectors
// (packages/openclaw-bridge/src/crypto.test.ts in serafim-labs/Sophon at
// 39bc4fd: the fixed keys and expected bytes below are theirs, the tests are
// ours), against Node's own crypto for what they publish no vector of (the
// envelope's layout, the decision signature), and the vendored tweetnacl
// against the sums scripts/vendor-tweetnacl.sh pins.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, createDecipheriv, createCipheriv, hkdfSync, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Node 18 has no global WebCrypto (Node 19 has).
if (!globalThis.crypto) globalThis.crypto = webcrypto;
const c = await import('../../../web/app/crypto.js');
const nacl = globalThis.nacl;

const hex = (s) => Uint8Array.from(Buffer.from(s, 'hex'));
const toHex = (b) => Buffer.from(b).toString('hex');

const INSTALL_KEY = hex('0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef');
const BRIDGE_SECRET = hex('1111111111111111111111111111111111111111111111111111111111111111');
const BRIDGE_PUBLIC = '7b4e909bbe7ffe44c465a220037d608ee35897d31ef972f07f74892cb0f73f13';
const PHONE_SECRET = hex('2222222222222222222222222222222222222222222222222222222222222222');
const PHONE_PUBLIC = '0faa684ed28867b97f4a6a2dee5df8ce974e76b7018e3f22a1c4cf2678570f20';

test('the vendored tweetnacl is 1.0.3 as published, licence beside it', () => {
  const dir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'web', 'app', 'vendor', 'tweetnacl');
  const script = readFileSync(resolve(dir, '..', '..', '..', '..', 'scripts', 'vendor-tweetnacl.sh'), 'utf8');
  const sums = [...script.matchAll(/([0-9a-f]{64}) {2}([\w.-]+)/g)];
  assert.equal(sums.length, 2);
  for (const [, sum, name] of sums) assert.equal(createHash('sha256').update(readFileSync(join(dir, name))).digest('hex'), sum, name);
});

test('public keys of the fixed secrets', () => {
  assert.equal(c.toHex(c.publicKeyOf(BRIDGE_SECRET)), BRIDGE_PUBLIC);
  assert.equal(c.toHex(c.publicKeyOf(PHONE_SECRET)), PHONE_PUBLIC);
  const kp = c.keyPair();
  assert.equal(kp.publicKey.length, 32);
  assert.equal(kp.secretKey.length, 32);
  assert.deepEqual(c.publicKeyOf(kp.secretKey), kp.publicKey);
});

test('blob key, blind index key and blind index: the pinned bytes', async () => {
  assert.equal(toHex(await c.blobKey(INSTALL_KEY, 'messages/abc')), '0e63257899b5f60d7bfde449cf46a92633c14aacc10e619b5c9485e6947464ec');
  assert.notEqual(toHex(await c.blobKey(INSTALL_KEY, 'messages/xyz')), toHex(await c.blobKey(INSTALL_KEY, 'messages/abc')));
  const indexKey = await c.blindIndexKey(INSTALL_KEY);
  assert.equal(toHex(indexKey), '4502be12df6ca509e22785edb957f143250f5c78ad1ad0156157c68f28394b8e');
  assert.equal(await c.blindIndex(indexKey, 'agent_files', 'ses_abc', '/Users/foo/bar.swift'), 'CC425Syg8HVCm_atfoI6lg');
  assert.match(await c.blindIndex(indexKey, 'agent_files', 'ses_abc', '/x'), /^[A-Za-z0-9_-]{22}$/);
});

test('the shared secret is crypto_box_beforenm, not raw X25519: the pinned install key and SAS', async () => {
  // Their install_key vector is HKDF over beforenm's output; ours derives from the same secret.
  const shared = nacl.box.before(hex(PHONE_PUBLIC), BRIDGE_SECRET);
  assert.equal(toHex(await c.hkdf(shared, 'sophon/v1/install_key', 32)), 'aa52bee1cc39d680ba05ccb4cef8541b0c80f05f1fe4321cfcd34ff2478ff11a');
  assert.notDeepEqual(shared, nacl.scalarMult(BRIDGE_SECRET, hex(PHONE_PUBLIC)));
  const atBridge = await c.sasBytes(BRIDGE_SECRET, hex(PHONE_PUBLIC));
  const atPhone = await c.sasBytes(PHONE_SECRET, hex(BRIDGE_PUBLIC));
  assert.equal(toHex(atBridge), 'e2fb1f8a');
  assert.equal(toHex(atPhone), 'e2fb1f8a');
  // e2 % 32 = 2, fb % 32 = 27, 1f = 31, 8a % 32 = 10 in the authors' table.
  assert.deepEqual(c.sasEmoji(atPhone), ['🐭', '🔥', '🎁', '🐮']);
  assert.equal(c.SAS_EMOJI.length, 32);
  assert.equal(new Set(c.SAS_EMOJI).size, 32);
});

test('envelope: layout, fresh nonce, empty sentinel, wrong key and tampering give null, malformed throws', async () => {
  const key = INSTALL_KEY;
  const ct = await c.seal(key, new TextEncoder().encode('x'));
  assert.equal(ct[0], 0x01);
  assert.equal(ct.length, 1 + 12 + 1 + 16);
  // Node's AES-256-GCM reads it: nonce, then ciphertext, then the tag.
  const d = createDecipheriv('aes-256-gcm', key, ct.subarray(1, 13));
  d.setAuthTag(ct.subarray(ct.length - 16));
  assert.equal(Buffer.concat([d.update(ct.subarray(13, ct.length - 16)), d.final()]).toString(), 'x');
  // And we read Node's.
  const nonce = hex('000102030405060708090a0b');
  const e = createCipheriv('aes-256-gcm', key, nonce);
  const body = Buffer.concat([e.update('hello sophon e2e'), e.final()]);
  const theirs = new Uint8Array([1, ...nonce, ...body, ...e.getAuthTag()]);
  assert.equal(new TextDecoder().decode(await c.open(key, theirs)), 'hello sophon e2e');

  const a = await c.seal(key, new TextEncoder().encode('same'));
  const b = await c.seal(key, new TextEncoder().encode('same'));
  assert.notDeepEqual(a.subarray(1, 13), b.subarray(1, 13));
  assert.deepEqual(await c.seal(key, new Uint8Array(0)), new Uint8Array([0]));
  assert.deepEqual(await c.open(key, new Uint8Array([0])), new Uint8Array(0));
  const tampered = Uint8Array.from(a);
  tampered[15] ^= 0xff;
  assert.equal(await c.open(key, tampered), null);
  assert.equal(await c.open(new Uint8Array(32), a), null);
  const bad = Uint8Array.from(a);
  bad[0] = 0x99;
  await assert.rejects(c.open(key, bad), c.EnvelopeError);
  await assert.rejects(c.open(key, a.subarray(0, 5)), c.EnvelopeError);
  await assert.rejects(c.seal(new Uint8Array(31), new Uint8Array(1)), /32 bytes/);
});

test('text fields: sealed under the blob key of their path, opened with any of a session\'s keys', async () => {
  const old = c.randomBytes(32);
  const current = c.randomBytes(32);
  const b64 = await c.sealText(old, 'messages/ses_1', 'héllo 👋');
  assert.match(b64, /^[A-Za-z0-9+/]+=*$/);
  assert.equal(await c.openText([current, old], 'messages/ses_1', b64), 'héllo 👋');
  assert.equal(await c.openText([current], 'messages/ses_1', b64), null);
  assert.equal(await c.openText([old], 'tasks/ses_1', b64), null);
  // What a bridge made with Node's crypto (HKDF then AES-GCM) reads the same.
  const blob = new Uint8Array(hkdfSync('sha256', current, new Uint8Array(0), Buffer.from('sophon/v1/blob/messages/ses_2'), 32));
  const nonce = c.randomBytes(12);
  const e = createCipheriv('aes-256-gcm', blob, nonce);
  const body = Buffer.concat([e.update('from the bridge'), e.final()]);
  const env = Buffer.from([1, ...nonce, ...body, ...e.getAuthTag()]).toString('base64');
  assert.equal(await c.openText([current], 'messages/ses_2', env), 'from the bridge');
  assert.equal(await c.sealText(current, 'messages/ses_2', ''), 'AA==');
});

test('sealed box: layout, round trip of a session key, wrong recipient, a box made with Node and tweetnacl', async () => {
  const recipient = c.keyPair();
  const sessionKey = Uint8Array.from({ length: 32 }, (_, i) => (i * 7 + 11) & 0xff);
  const env = await c.sealBox(sessionKey, recipient.publicKey);
  assert.equal(env[0], 0x02);
  assert.equal(env[33], 0x01);
  assert.equal(env.length, 1 + 32 + 1 + 12 + 32 + 16);
  assert.deepEqual(await c.openBox(env, recipient.secretKey), sessionKey);
  assert.equal(await c.openBox(env, c.keyPair().secretKey), null);
  assert.notDeepEqual(await c.sealBox(sessionKey, recipient.publicKey), env);
  const wrapped = await c.wrapKey(sessionKey, c.toHex(recipient.publicKey));
  assert.deepEqual(await c.unwrapKey(wrapped, recipient.secretKey), sessionKey);
  const bad = Uint8Array.from(env);
  bad[0] = 0x99;
  await assert.rejects(c.openBox(bad, recipient.secretKey), c.EnvelopeError);
  await assert.rejects(c.openBox(new Uint8Array([2, 0, 0]), recipient.secretKey), c.EnvelopeError);

  // The bridge's side, independently: beforenm(phone_pub, eph_sec), HKDF, AES-GCM.
  const eph = nacl.box.keyPair();
  const key = hkdfSync('sha256', nacl.box.before(hex(PHONE_PUBLIC), eph.secretKey), new Uint8Array(0), Buffer.from('sophon/v1/sealed-box'), 32);
  const nonce = c.randomBytes(12);
  const e = createCipheriv('aes-256-gcm', new Uint8Array(key), nonce);
  const body = Buffer.concat([e.update(sessionKey), e.final()]);
  const theirs = Buffer.from([2, ...eph.publicKey, 1, ...nonce, ...body, ...e.getAuthTag()]).toString('base64');
  assert.deepEqual(await c.unwrapKey(theirs, PHONE_SECRET), sessionKey);
});

test('decision signature: what the contract signs, the same from the bridge\'s side', async () => {
  const fields = { approvalId: 'apr_1', sessionId: 'ses_1', decision: 'approve', scope: 'session', deviceId: 'dev_phone' };
  const sig = await c.decisionSig(PHONE_SECRET, hex(BRIDGE_PUBLIC), fields);
  // The bridge recomputes K from (phone public, bridge secret).
  const k = hkdfSync('sha256', nacl.box.before(hex(PHONE_PUBLIC), BRIDGE_SECRET), new Uint8Array(0), Buffer.from('relay/v1/decision'), 32);
  const mac = (scope, decision = 'approve') => createHmac('sha256', Buffer.from(k))
    .update(Buffer.from(`relay/v1/decision\xffapr_1\xffses_1\xff${decision}\xff${scope}\xffdev_phone`, 'latin1'))
    .digest('base64');
  // The separators are 0xFF bytes, the fields UTF-8 (ASCII here).
  assert.equal(sig, mac('session'));
  assert.notEqual(sig, mac('session', 'deny'));
  assert.equal(await c.decisionSig(PHONE_SECRET, hex(BRIDGE_PUBLIC), { ...fields, scope: null }), mac(''));
  assert.notEqual(await c.decisionSig(c.keyPair().secretKey, hex(BRIDGE_PUBLIC), fields), sig);
});

test('grant signature: the vector tests/unit/e2e shares, the same from the bridge\'s side', async () => {
  const fields = { sessionId: 'ses_1', wrapped: 'AhEiM0RVZneImaq7zN3u/w==', deviceId: 'dev_1' };
  const sig = await c.grantSig(PHONE_SECRET, hex(BRIDGE_PUBLIC), fields);
  // Pinned: the C side (rl_e2e_grant_sig) computes the same bytes.
  assert.equal(sig, 'oLfyUC6L3kYta5DwGjLhnRIh8lnAUuyDQN6vcP9AQNk=');
  const k = hkdfSync('sha256', nacl.box.before(hex(PHONE_PUBLIC), BRIDGE_SECRET), new Uint8Array(0), Buffer.from('relay/v1/grant'), 32);
  const mac = (sid, wrapped, dev) => createHmac('sha256', Buffer.from(k))
    .update(Buffer.from(`relay/v1/grant\xff${sid}\xff${wrapped}\xff${dev}`, 'latin1'))
    .digest('base64');
  assert.equal(sig, mac('ses_1', fields.wrapped, 'dev_1'));
  assert.notEqual(sig, mac('ses_2', fields.wrapped, 'dev_1'));
  assert.notEqual(sig, mac('ses_1', fields.wrapped, 'dev_2'));
  assert.notEqual(await c.grantSig(c.keyPair().secretKey, hex(BRIDGE_PUBLIC), fields), sig);
  // A decision over the same strings signs under another key.
  assert.notEqual(await c.decisionSig(PHONE_SECRET, hex(BRIDGE_PUBLIC), { approvalId: 'ses_1', sessionId: fields.wrapped, decision: 'dev_1', scope: '', deviceId: 'dev_1' }), sig);
});

test('encodings: hex and base64 round trips, bad input throws', () => {
  const bytes = new Uint8Array(70000).map((_, i) => (i * 31 + 7) & 0xff);
  assert.deepEqual(c.fromBase64(c.toBase64(bytes)), bytes);
  assert.equal(c.toBase64(bytes), Buffer.from(bytes).toString('base64'));
  assert.deepEqual(c.fromHex(c.toHex(bytes.subarray(0, 32))), bytes.subarray(0, 32));
  assert.throws(() => c.fromHex('zz'), c.EnvelopeError);
  assert.throws(() => c.fromBase64('%%%'), c.EnvelopeError);
});
