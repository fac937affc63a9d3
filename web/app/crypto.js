// End-to-end encryption's primitives, byte for byte the protocol authors'
// wire (docs/api.md "Encrypted sessions"; the lead's contract §0). Pure: no
// DOM, no storage, no network; the unit tests (tests/browser/unit/crypto.test.js)
// hold it to the authors' published vectors.
//
// X25519 and NaCl's crypto_box_beforenm (X25519 then HSalsa20) come from
// tweetnacl 1.0.3 (vendored, scripts/vendor-tweetnacl.sh): WebCrypto has no
// HSalsa20, and the wire keys its sealed boxes and SAS by beforenm's output,
// not the raw X25519 one. AES-256-GCM, HKDF-SHA256 and HMAC-SHA256 come from
// WebCrypto. tweetnacl is a script, not a module: imported for its effect, it
// sets self.nacl (nacl-scope.js gives Node a `self` first).
import './nacl-scope.js';
import './vendor/tweetnacl/nacl-fast.js';

const VERSION_SYMMETRIC = 0x01;
const VERSION_SEALED = 0x02;
const SENTINEL_EMPTY = 0x00;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

// The authors' 32 emoji for the SAS (their sas-emojis.ts): interop data, in their order.
export const SAS_EMOJI = [
  '🐱', '🐶', '🐭', '🐹', '🐰', '🐻', '🐼', '🐨',
  '🐯', '🦁', '🐮', '🐷', '🐸', '🦊', '🐔', '🐺',
  '🍎', '🍌', '🍇', '🍓', '🍑', '🍒', '🥕', '🌽',
  '🌙', '⭐', '🌈', '🔥', '⚡', '🚀', '⚓', '🎁',
];

const nacl = () => {
  const lib = globalThis.nacl;
  if (!lib || !lib.box) throw new Error('tweetnacl is not loaded');
  return lib;
};
const subtle = () => globalThis.crypto.subtle;
const utf8 = (s) => new TextEncoder().encode(s);

export class EnvelopeError extends Error {}

// ---- encodings: keys as lowercase hex, wraps and envelopes as padded base64 ----

export function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function fromHex(text) {
  if (typeof text !== 'string' || text.length % 2 || /[^0-9a-fA-F]/.test(text)) throw new EnvelopeError('not hex');
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function toBase64(bytes) {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

export function fromBase64(text) {
  let raw;
  try {
    raw = atob(String(text).replace(/-/g, '+').replace(/_/g, '/'));
  } catch (err) {
    throw new EnvelopeError('not base64');
  }
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

const toBase64Url = (bytes) => toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function randomBytes(n) {
  return globalThis.crypto.getRandomValues(new Uint8Array(n));
}

// ---- key derivation ----

// HKDF-SHA256 with an empty salt, as every derivation of the wire uses.
export async function hkdf(ikm, info, length) {
  const key = await subtle().importKey('raw', ikm, 'HKDF', false, ['deriveBits']);
  const bits = await subtle().deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: utf8(info) }, key, length * 8);
  return new Uint8Array(bits);
}

async function hmac(key, data) {
  const k = await subtle().importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await subtle().sign('HMAC', k, data));
}

// The key of one field family of a session: path is messages/<sid>, tasks/<sid>, approvals/<sid>,
// agent_files/<sid>/<blind index> or session_meta/<sid>.
export function blobKey(sessionKey, path) {
  if (sessionKey.length !== KEY_BYTES) throw new Error('a session key is 32 bytes');
  return hkdf(sessionKey, `sophon/v1/blob/${path}`, KEY_BYTES);
}

export function blindIndexKey(sessionKey) {
  return hkdf(sessionKey, 'sophon/v1/blind-index', KEY_BYTES);
}

// First 16 bytes of HMAC(key, scope ‖ (0xFF ‖ input)*), base64url without padding.
export async function blindIndex(indexKey, scope, ...inputs) {
  const parts = [utf8(scope)];
  for (const input of inputs) parts.push(new Uint8Array([0xff]), utf8(input));
  return toBase64Url((await hmac(indexKey, concat(...parts))).subarray(0, 16));
}

// ---- the symmetric envelope: 0x01 ‖ nonce(12) ‖ AES-256-GCM ciphertext ‖ tag(16); empty is 0x00 ----

export async function seal(key, plaintext) {
  if (key.length !== KEY_BYTES) throw new Error('an envelope key is 32 bytes');
  if (plaintext.length === 0) return new Uint8Array([SENTINEL_EMPTY]);
  const nonce = randomBytes(NONCE_BYTES);
  const k = await subtle().importKey('raw', key, 'AES-GCM', false, ['encrypt']);
  const body = new Uint8Array(await subtle().encrypt({ name: 'AES-GCM', iv: nonce, tagLength: 128 }, k, plaintext));
  return concat(new Uint8Array([VERSION_SYMMETRIC]), nonce, body);
}

// The plaintext, or null when the key is not the one (or the bytes were changed): the two are
// told apart by no one. A malformed envelope throws EnvelopeError.
export async function open(key, envelope) {
  if (key.length !== KEY_BYTES) throw new Error('an envelope key is 32 bytes');
  if (envelope.length === 0) throw new EnvelopeError('empty envelope');
  if (envelope.length === 1 && envelope[0] === SENTINEL_EMPTY) return new Uint8Array(0);
  if (envelope[0] !== VERSION_SYMMETRIC) throw new EnvelopeError(`unknown envelope version ${envelope[0]}`);
  if (envelope.length < 1 + NONCE_BYTES + TAG_BYTES) throw new EnvelopeError('envelope too short');
  const k = await subtle().importKey('raw', key, 'AES-GCM', false, ['decrypt']);
  try {
    const plain = await subtle().decrypt({ name: 'AES-GCM', iv: envelope.subarray(1, 1 + NONCE_BYTES), tagLength: 128 }, k,
      envelope.subarray(1 + NONCE_BYTES));
    return new Uint8Array(plain);
  } catch (err) {
    return null;
  }
}

// Bytes of a session as uploaded (a sealed attachment): the raw envelope, not base64.
export async function sealBytes(sessionKey, path, bytes) {
  return seal(await blobKey(sessionKey, path), bytes);
}

// The bytes of a raw envelope, trying the session's keys in turn; null when none opens it.
export async function openBytes(sessionKeys, path, envelope) {
  for (const sessionKey of sessionKeys) {
    const plain = await open(await blobKey(sessionKey, path), envelope);
    if (plain) return plain;
  }
  return null;
}

export async function sha256Hex(bytes) {
  return toHex(new Uint8Array(await subtle().digest('SHA-256', bytes)));
}

// A text field of a session as the wire carries it (base64).
export async function sealText(sessionKey, path, text) {
  return toBase64(await seal(await blobKey(sessionKey, path), utf8(text)));
}

// The text of a field, trying the session's keys in turn (a rotated session has several, newest
// first); null when none opens it.
export async function openText(sessionKeys, path, b64) {
  const envelope = fromBase64(b64);
  for (const sessionKey of sessionKeys) {
    const plain = await open(await blobKey(sessionKey, path), envelope);
    if (plain) return new TextDecoder().decode(plain);
  }
  return null;
}

// ---- X25519 and the sealed box ----

export function keyPair() {
  const kp = nacl().box.keyPair();
  return { publicKey: kp.publicKey, secretKey: kp.secretKey };
}

export function publicKeyOf(secretKey) {
  return nacl().box.keyPair.fromSecretKey(secretKey).publicKey;
}

// crypto_box_beforenm: X25519 then HSalsa20, the shared secret every derivation below starts from.
function shared(theirPublic, mySecret) {
  if (theirPublic.length !== 32 || mySecret.length !== 32) throw new Error('X25519 keys are 32 bytes');
  return nacl().box.before(theirPublic, mySecret);
}

// 0x02 ‖ ephemeral public key ‖ envelope keyed by HKDF(beforenm(recipient, ephemeral), "sophon/v1/sealed-box").
export async function sealBox(plaintext, recipientPublic) {
  const eph = nacl().box.keyPair();
  const s = shared(recipientPublic, eph.secretKey);
  const key = await hkdf(s, 'sophon/v1/sealed-box', KEY_BYTES);
  eph.secretKey.fill(0);
  s.fill(0);
  return concat(new Uint8Array([VERSION_SEALED]), eph.publicKey, await seal(key, plaintext));
}

export async function openBox(envelope, recipientSecret) {
  if (envelope.length === 0) throw new EnvelopeError('empty sealed box');
  if (envelope[0] !== VERSION_SEALED) throw new EnvelopeError(`unknown sealed box version ${envelope[0]}`);
  if (envelope.length < 1 + 32 + 1) throw new EnvelopeError('sealed box too short');
  const s = shared(envelope.subarray(1, 33), recipientSecret);
  const key = await hkdf(s, 'sophon/v1/sealed-box', KEY_BYTES);
  s.fill(0);
  return open(key, envelope.subarray(33));
}

// A session key wrapped for a device (its public key in hex), as base64; and back.
export async function wrapKey(sessionKey, devicePublicHex) {
  return toBase64(await sealBox(sessionKey, fromHex(devicePublicHex)));
}

export async function unwrapKey(wrapped, deviceSecret) {
  const key = await openBox(fromBase64(wrapped), deviceSecret);
  return key && key.length === KEY_BYTES ? key : null;
}

// A device-to-device answer sealed with NaCl's crypto_box (docs/api.md "Projects": the bridge's answer to a
// projects or agent-sessions request): base64(nonce(24) ‖ crypto_box_easy(JSON, nonce, my public, their secret)).
// The text, or null when it does not open (not from that peer, changed on the way, or not addressed to me).
export function openFromPeer(b64, mySecret, theirPublic) {
  const bytes = fromBase64(b64);
  if (bytes.length < 24 + 16) throw new EnvelopeError('sealed answer too short');
  if (theirPublic.length !== 32 || mySecret.length !== 32) throw new Error('X25519 keys are 32 bytes');
  const plain = nacl().box.open(bytes.subarray(24), bytes.subarray(0, 24), theirPublic, mySecret);
  return plain ? new TextDecoder().decode(plain) : null;
}

// ---- what two devices derive together ----

// The short authentication string: 4 bytes, the same on both devices.
export function sasBytes(mySecret, theirPublic) {
  return hkdf(shared(theirPublic, mySecret), 'sophon/v1/sas', 4);
}

export function sasEmoji(bytes) {
  return Array.from(bytes, (b) => SAS_EMOJI[b % 32]);
}

// Our extension: an approval decision authenticated to the bridge with a key only the phone and
// the bridge derive (docs/api.md says what is signed).
export function decisionSig(deviceSecret, bridgePublic, { approvalId, sessionId, decision, scope, deviceId }) {
  return pairSig(deviceSecret, bridgePublic, 'relay/v1/decision', [approvalId, sessionId, decision, scope || '', deviceId]);
}

// Ours (issue 36): a change of a session's mode, model or other option, authenticated to the bridge like a
// decision, so that a relay cannot switch an agent to "ask nothing" (docs/api.md "Steering"). ts: integer ms.
export function configSig(deviceSecret, bridgePublic, { sessionId, optionId, value, ts, deviceId }) {
  return pairSig(deviceSecret, bridgePublic, 'relay/v1/config', [sessionId, optionId, value, String(ts), deviceId]);
}

// Ours too: a session key this device wraps for a bridge, authenticated to that bridge (a sealed
// box does not say who sealed it, so without this the relay could slip the bridge a key of its
// own under this device's name). wrapped is the wrap's base64 exactly as sent; deviceId this
// device's id (wrapped_by_device_id). docs/api.md, "Signed grants".
export function grantSig(deviceSecret, bridgePublic, { sessionId, wrapped, deviceId }) {
  return pairSig(deviceSecret, bridgePublic, 'relay/v1/grant', [sessionId, wrapped, deviceId]);
}

// base64(HMAC-SHA256(HKDF(box.before(their public, my secret), purpose), purpose (0xFF part)*)).
async function pairSig(mySecret, theirPublic, purpose, fields) {
  const key = await hkdf(shared(theirPublic, mySecret), purpose, KEY_BYTES);
  const sep = new Uint8Array([0xff]);
  const parts = [purpose, ...fields].map(utf8);
  const message = concat(...parts.flatMap((p, i) => (i ? [sep, p] : [p])));
  return toBase64(await hmac(key, message));
}

// ---- the enrolment code (issue 34): evidence the relay cannot make ----

// What relay-bridge shows on its machine: 20 characters of this alphabet (no I, O, 0, 1), 100 bits,
// in five groups of four. It reaches the phone out of band (read off the screen, or in the fragment
// of a link the bridge prints), never through relayd.
export const ENROL_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
export const ENROL_LENGTH = 20;

// The code as it is used: upper case, without dashes and white space. Returns { code } or
// { error } saying what is wrong with it (the app then sends nothing).
export function normaliseEnrolCode(text) {
  const code = String(text == null ? '' : text).toUpperCase().replace(/[\s-]+/g, '');
  const stray = [...code].find((ch) => !ENROL_ALPHABET.includes(ch));
  if (stray !== undefined) {
    const lookalike = { O: 'O (codes use no O, 0, I or 1)', 0: '0 (codes use no O, 0, I or 1)', I: 'I (codes use no O, 0, I or 1)', 1: '1 (codes use no O, 0, I or 1)' }[stray];
    return { error: `The code has ${lookalike || `“${stray}”, which codes never have`}: check it against the machine's screen.` };
  }
  if (code.length !== ENROL_LENGTH) {
    return { error: `The code has ${code.length} letters and digits; the machine's has ${ENROL_LENGTH} (five groups of four).` };
  }
  return { code };
}

// Five groups of four joined by dashes, as the machine shows it (what is typed so far, grouped).
export function groupEnrolCode(code) {
  return (code.match(/.{1,4}/g) || []).join('-');
}

// The proof sent with a confirmation (the lead's contract, "enrol_proof"):
// base64(HMAC-SHA256(HKDF-SHA256(code, salt empty, "relay/v1/enrol", 32),
//        "relay/v1/enrol" ‖ 0xFF ‖ bridge device id ‖ 0xFF ‖ device id ‖ 0xFF ‖ device public key hex)).
// It names both devices and this device's key, so the relay can neither replay it for another device
// nor learn the code from it (the code's 100 bits are not guessed offline in any useful time).
export async function enrolProof(text, { bridgeDeviceId, deviceId, devicePublicHex }) {
  const { code, error } = normaliseEnrolCode(text);
  if (error) throw new Error(error);
  const key = await hkdf(utf8(code), 'relay/v1/enrol', KEY_BYTES);
  const sep = new Uint8Array([0xff]);
  const parts = ['relay/v1/enrol', bridgeDeviceId, deviceId, devicePublicHex].map(utf8);
  const message = concat(...parts.flatMap((p, i) => (i ? [sep, p] : [p])));
  return toBase64(await hmac(key, message));
}
