// web/app/keystore.js placeGrant: where a granted session key goes by how far
// it is trusted (docs/api.md "Signed grants"). Only a signed grant chooses the
// key this browser seals with; the relay's own key, unsigned or forged, never
// does once a key is held.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';

if (!globalThis.crypto) globalThis.crypto = webcrypto;
const { placeGrant } = await import('../../../web/app/keystore.js');
const c = await import('../../../web/app/crypto.js');

const key = (n) => new Uint8Array(32).fill(n);
const sealing = (keys) => keys[0].key[0];

test('first key wins: an unsigned or peer grant is taken only for a session with no key, a forged one never', () => {
  assert.equal(placeGrant([], key(1), 'forged', 1000).taken, 'refused');
  for (const trust of ['unsigned', 'peer', 'signed']) {
    const placed = placeGrant([], key(1), trust, 1000);
    assert.equal(placed.taken, 'seal');
    assert.equal(sealing(placed.keys), 1);
  }
});

test('a held session: the relay\'s key, unsigned or forged, neither replaces nor joins the real one', () => {
  const held = placeGrant([], key(1), 'signed', 1000).keys;
  for (const trust of ['unsigned', 'forged']) {
    const placed = placeGrant(held, key(9), trust, 5000);
    assert.equal(placed.taken, 'refused');
    assert.deepEqual(placed.keys, held);
  }
  assert.equal(placeGrant(held, key(1), 'unsigned', 5000).taken, 'known');
});

test('another phone\'s rotation is kept to read with, never to seal with, even with a later time', () => {
  const held = placeGrant([], key(1), 'signed', 1000).keys;
  const placed = placeGrant(held, key(2), 'peer', 9e15);
  assert.equal(placed.taken, 'read');
  assert.equal(sealing(placed.keys), 1);
  assert.equal(placed.keys[1].key[0], 2);
  assert.ok(placed.keys[1].at < placed.keys[0].at);
});

test('a signed grant seals next, whatever times the relay gave the older keys', () => {
  const held = [{ key: key(1), at: 9e15 }];
  const placed = placeGrant(held, key(2), 'signed', 1000);
  assert.equal(placed.taken, 'seal');
  assert.equal(sealing(placed.keys), 2);
  assert.equal(placed.keys[1].key[0], 1);
  assert.ok(placed.keys[0].at > placed.keys[1].at);
});

test('a device\'s own wrap signs and verifies under its own key pair, and not under another device\'s', async () => {
  const me = c.keyPair();
  const other = c.keyPair();
  const fields = { sessionId: 'ses_1', wrapped: 'AhEiM0RVZneImaq7zN3u/w==', deviceId: 'dev_me' };
  const sig = await c.grantSig(me.secretKey, me.publicKey, fields);
  assert.equal(await c.grantSig(me.secretKey, me.publicKey, fields), sig);
  assert.notEqual(await c.grantSig(other.secretKey, other.publicKey, fields), sig);
  assert.notEqual(await c.grantSig(me.secretKey, me.publicKey, { ...fields, sessionId: 'ses_2' }), sig);
});
