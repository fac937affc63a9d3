// The enrolment code and its proof (web/app/crypto.js; the lead's contract for
// issue 34, finding 1): the contract's test vector, the same proof recomputed
// with Node's own crypto for other inputs, and what the app calls malformed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, hkdfSync, randomBytes, webcrypto } from 'node:crypto';

if (!globalThis.crypto) globalThis.crypto = webcrypto;
const c = await import('../../../web/app/crypto.js');

const VECTOR = {
  code: 'ABCD-EFGH-JKLM-NPQR-ST23',
  bridgeDeviceId: 'dev_BRIDGE0000000000000',
  deviceId: 'dev_PHONE00000000000000',
  devicePublicHex: '11'.repeat(32),
  proof: 'TBQSpeUbhle8y0ZdY6Lc4i9JROohoQzGxa64frFmlMM=',
};

// The contract's construction, written again with node:crypto.
function nodeProof(code, bridgeDeviceId, deviceId, pubHex) {
  const key = Buffer.from(hkdfSync('sha256', Buffer.from(code, 'ascii'), Buffer.alloc(0), Buffer.from('relay/v1/enrol'), 32));
  const sep = Buffer.from([0xff]);
  return createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from('relay/v1/enrol'), sep, Buffer.from(bridgeDeviceId), sep, Buffer.from(deviceId), sep, Buffer.from(pubHex)]))
    .digest('base64');
}

test('the contract\'s test vector', async () => {
  const proof = await c.enrolProof(VECTOR.code, VECTOR);
  assert.equal(proof, VECTOR.proof);
  assert.equal(proof.length, 44);
  // The code as typed (lower case, spaces, no dashes) is the same code.
  assert.equal(await c.enrolProof(' abcd efgh-jklm  npqrst23 ', VECTOR), VECTOR.proof);
  assert.equal(await c.enrolProof('ABCDEFGHJKLMNPQRST23', VECTOR), VECTOR.proof);
});

test('random codes and devices: the same proof as node:crypto computes; each input changes it', async () => {
  for (let i = 0; i < 50; i++) {
    const code = Array.from(randomBytes(20), (b) => c.ENROL_ALPHABET[b % 32]).join('');
    const ids = { bridgeDeviceId: `dev_${randomBytes(10).toString('hex')}`, deviceId: `dev_${randomBytes(10).toString('hex')}`,
      devicePublicHex: randomBytes(32).toString('hex') };
    const proof = await c.enrolProof(c.groupEnrolCode(code), ids);
    assert.equal(proof, nodeProof(code, ids.bridgeDeviceId, ids.deviceId, ids.devicePublicHex));
    assert.notEqual(await c.enrolProof(code, { ...ids, deviceId: `${ids.deviceId}x` }), proof);
    assert.notEqual(await c.enrolProof(code, { ...ids, bridgeDeviceId: `${ids.bridgeDeviceId}x` }), proof);
    assert.notEqual(await c.enrolProof(code, { ...ids, devicePublicHex: '00'.repeat(32) }), proof);
  }
});

test('normalised: upper case, no dashes or white space; grouped back in fours', () => {
  assert.deepEqual(c.normaliseEnrolCode('abcd-efgh-jklm-npqr-st23'), { code: 'ABCDEFGHJKLMNPQRST23' });
  assert.deepEqual(c.normaliseEnrolCode('ABCD EFGH\tJKLM\nNPQR ST23'), { code: 'ABCDEFGHJKLMNPQRST23' });
  assert.equal(c.groupEnrolCode('ABCDEFGHJKLMNPQRST23'), 'ABCD-EFGH-JKLM-NPQR-ST23');
  assert.equal(c.groupEnrolCode('ABCDEF'), 'ABCD-EF');
  assert.equal(c.groupEnrolCode(''), '');
  assert.equal(c.ENROL_ALPHABET.length, 32);
  assert.equal(new Set(c.ENROL_ALPHABET).size, 32);
});

test('malformed codes are refused with a reason, and no proof is made of them', async () => {
  const cases = [
    ['', /0 letters and digits/],
    ['ABCD-EFGH-JKLM-NPQR-ST2', /19 letters and digits/],
    ['ABCD-EFGH-JKLM-NPQR-ST234', /21 letters and digits/],
    ['ABCD-EFGH-JKLM-NPQR-ST2O', /has O \(codes use no O, 0, I or 1\)/],
    ['ABCD-EFGH-JKLM-NPQR-ST20', /has 0 /],
    ['ABCD-EFGH-JKLM-NPQR-ST2I', /has I /],
    ['ABCD-EFGH-JKLM-NPQR-ST21', /has 1 /],
    ['ABCD-EFGH-JKLM-NPQR-ST2!', /“!”, which codes never have/],
    ['ABCD_EFGH_JKLM_NPQR_ST23', /“_”/],
    ['ABCDÉFGHJKLMNPQRST23', /“É”/],
  ];
  for (const [text, reason] of cases) {
    const result = c.normaliseEnrolCode(text);
    assert.equal(result.code, undefined, text);
    assert.match(result.error, reason, text);
    await assert.rejects(c.enrolProof(text, VECTOR), reason);
  }
  assert.match(c.normaliseEnrolCode(null).error, /0 letters/);
});
