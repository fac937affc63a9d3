// web/app/notify.js and decision.js without a browser: which actions an approval's
// notification offers (docs/web.md "Approve or deny from the notification"), and
// that the body the worker signs is the one the page signs (decision.js), which
// verifies as the bridge checks it (docs/api.md "Approval decisions: what is signed").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { webcrypto, createHmac, hkdfSync } from 'node:crypto';
import nacl from 'tweetnacl';

if (!globalThis.crypto) globalThis.crypto = webcrypto;
const { approvalActions } = await import('../../../web/app/notify.js');
const { signedDecision } = await import('../../../web/app/decision.js');

const hex = (b) => Buffer.from(b).toString('hex');

test('Approve only for a low or medium request the notification shows; Deny always', () => {
  const actions = (note, readable) => approvalActions(note, readable).map((a) => a.action);
  assert.deepEqual(actions({ severity: 'low' }, true), ['approve', 'deny']);
  assert.deepEqual(actions({ severity: 'medium' }, true), ['approve', 'deny']);
  assert.deepEqual(actions({}, true), ['approve', 'deny']);
  assert.deepEqual(actions({ severity: 'high' }, true), ['deny', 'open'], 'a high-risk request is approved in the app');
  assert.deepEqual(actions({ severity: 'low' }, false), ['deny', 'open'], 'nothing approved blind');
  assert.equal(approvalActions({ severity: 'high' }, true)[1].title, 'Open to approve');
});

test('the signed body verifies with the bridge\'s own derivation; without a verified machine there is none', async () => {
  const device = nacl.box.keyPair();
  const bridge = nacl.box.keyPair();
  const me = { device_id: 'dev_web', secret_key: device.secretKey };
  const approval = { approval_id: 'apr_1', session_id: 'ses_1' };
  const body = await signedDecision(approval, me, { pubkey: hex(bridge.publicKey), confirmed_by_me: true }, { decision: 'deny' });
  const key = hkdfSync('sha256', nacl.box.before(device.publicKey, bridge.secretKey), Buffer.alloc(0), Buffer.from('relay/v1/decision'), 32);
  const expected = createHmac('sha256', Buffer.from(key)).update(Buffer.from('relay/v1/decision\xffapr_1\xffses_1\xffdeny\xff\xffdev_web', 'latin1')).digest('base64');
  assert.deepEqual(body, { decision: 'deny', decision_sig: expected, device_id: 'dev_web' });
  // Another approval's signature differs: one cannot be replayed on another.
  const other = await signedDecision({ ...approval, approval_id: 'apr_2' }, me, { pubkey: hex(bridge.publicKey), confirmed_by_me: true }, { decision: 'deny' });
  assert.notEqual(other.decision_sig, body.decision_sig);
  assert.equal(await signedDecision(approval, me, { pubkey: hex(bridge.publicKey), confirmed_by_me: false }, { decision: 'deny' }), null);
  assert.equal(await signedDecision(approval, null, { pubkey: hex(bridge.publicKey), confirmed_by_me: true }, { decision: 'deny' }), null);
  assert.equal(await signedDecision(approval, me, null, { decision: 'deny' }), null);
});
