// This browser as an end-to-end device (docs/web.md "End-to-end encryption";
// docs/api.md "Encrypted sessions"): its X25519 key pair (IndexedDB, never
// sent), its registration with the relay, the user's devices and which bridges
// this one confirmed by the SAS, and the session keys it holds.
//
// Session keys reach this device as wraps addressed to it (sealed boxes to its
// public key): read with GET /v1/me/devices/:id/keys at start and on each
// session_key_granted, unwrapped here and kept in IndexedDB. This device makes
// a key itself for a new encrypted session, and a new key for every encrypted
// session it holds after a device is revoked (rotation): wrapped for itself,
// the session's bridge and the user's other devices; the relay refuses a wrap
// to a device that has not confirmed that bridge (409 device_unconfirmed),
// which is left out then.
//
// Below state.js (which opens what it reads with keysOf) and the screens.
import { get, post, patch, del, useDevice, ApiError } from './api.js';
import { keyPair, toHex, fromHex, randomBytes, wrapKey, unwrapKey, sasBytes, sasEmoji, grantSig, enrolProof,
  normaliseEnrolCode, groupEnrolCode, openFromPeer, EnvelopeError } from './crypto.js';
import * as keystore from './keystore.js';
import { signedDecision, signedConfig } from './decision.js';
import { openEvent, eventSession, openMessage, openTimelineItem, openApproval, openSession, sealSend, sealTitle,
  openCapabilityRequest, sealAnswer, sealFile, sealMeta, openFile, sealProject } from './sealed.js';

export const e2e = {
  supported: typeof indexedDB !== 'undefined' && !!(globalThis.crypto && globalThis.crypto.subtle),
  device: null, // { user_id, device_id, public_key, secret_key }
  devices: [], // GET /v1/me/devices
  keys: new Map(), // session id -> [{ key, at }] newest first
  firstUse: new Set(), // sessions whose sealing key came from an unsigned grant (taken on first use), in this page
  error: null,
};

const listeners = new Set();

// fn(sessionId or null): a key arrived for that session, or the devices changed (null).
export function onKeys(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function changed(sessionId) {
  for (const fn of [...listeners]) fn(sessionId || null);
}

export function keysOf(sessionId) {
  return (e2e.keys.get(sessionId) || []).map((k) => k.key);
}

export const hasKey = (sessionId) => keysOf(sessionId).length > 0;

function label() {
  const ua = typeof navigator !== 'undefined' ? navigator.userAgent : '';
  const browser = /Firefox\//.test(ua) ? 'Firefox' : /Edg\//.test(ua) ? 'Edge' : /Chrom/.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'Browser';
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Mac OS/.test(ua) ? 'macOS' : /Windows/.test(ua) ? 'Windows' : /Linux/.test(ua) ? 'Linux' : '';
  return `${browser}${os ? ` on ${os}` : ''}`.slice(0, 64);
}

// The device of this browser for this account: made once, registered (idempotent by public key).
export async function start(userId) {
  if (!e2e.supported) return null;
  try {
    if (!userId) userId = (await get('/v1/me')).user.id;
    let device = await keystore.loadDevice(userId);
    if (!device) {
      const kp = keyPair();
      device = { user_id: userId, device_id: null, public_key: toHex(kp.publicKey), secret_key: kp.secretKey };
      await keystore.saveDevice(device);
    }
    if (!device.device_id) {
      const result = await post('/v1/me/devices', { pubkey: device.public_key, label: label(), platform: 'web' });
      const row = result.device || result;
      device = { ...device, device_id: result.device_id || row.device_id || row.id };
      await keystore.saveDevice(device);
    }
    e2e.device = device;
    useDevice(device.device_id);
    e2e.keys = await keystore.loadSessionKeys();
    await refreshDevices();
    await fetchKeys();
    e2e.error = null;
  } catch (err) {
    // A relay without devices (404) leaves the app as it was: plain sessions only.
    e2e.error = err;
    console.warn('relay: end-to-end encryption is not available', err);
  }
  changed(null);
  return e2e.device;
}

export async function refreshDevices() {
  const result = await get('/v1/me/devices');
  // A device's id is `device_id` in relayd's views; `id` here.
  e2e.devices = (result.devices || []).map((d) => ({ ...d, id: d.device_id || d.id }));
  // This device was revoked from another one: its keys are of no use any more, a new device starts over.
  if (e2e.device && !e2e.devices.some((d) => d.id === e2e.device.device_id)) {
    await keystore.forgetDevice(e2e.device.user_id);
    useDevice(null);
    e2e.device = null;
  }
  changed(null);
  return e2e.devices;
}

const bridges = () => e2e.devices.filter((d) => d.platform === 'bridge' && !d.revoked_at);

export const bridgeOf = (installationId) => bridges().find((d) => d.installation_id === installationId) || null;

// Whether a new chat on this machine is encrypted: its bridge has a device this browser confirmed.
export function canEncrypt(installationId) {
  const bridge = bridgeOf(installationId);
  return !!(e2e.device && bridge && bridge.confirmed_by_me);
}

// The SAS this browser and a bridge device both show.
export async function sasWith(bridge) {
  return sasEmoji(await sasBytes(e2e.device.secret_key, fromHex(bridge.pubkey)));
}

// ---- how each machine came to accept this device (issue 34, finding 1) ----
//
// relayd's confirmed_by_me says only that this device confirmed a bridge. An upgraded relay-bridge
// takes the device only with an enrol_proof made from the one-time code on its screen, or once its
// owner runs `relay-bridge devices confirm <device id>` there; it tells nobody when it does. What this
// browser knows is kept per device in localStorage (relay.enrol.<device id>: bridge device id ->
// {how: 'code' or 'machine', at, keys_at}): how it confirmed, and when a grant signed by that bridge
// (which only a bridge that accepted this device makes, and the relay cannot forge) came after it.
// docs/web.md, "Verifying a machine", says what each state means and what it cannot tell.

const ENROL_RECORDS = 'relay.enrol.';
const CLOCK_SKEW_MS = 30000;
const loadedAt = Date.now();

function records() {
  if (!e2e.device) return {};
  try {
    return JSON.parse(localStorage.getItem(ENROL_RECORDS + e2e.device.device_id) || '{}') || {};
  } catch (err) {
    return {};
  }
}

function saveRecords(all) {
  try {
    if (e2e.device) localStorage.setItem(ENROL_RECORDS + e2e.device.device_id, JSON.stringify(all));
  } catch (err) {
    // storage full or disabled: the rows then say less, nothing else changes
  }
}

// 'unverified' (not confirmed here), 'earlier' (confirmed before machines asked for a code: an upgraded
// bridge waits for this device to be verified again), 'waiting' (confirmed without the code: the
// machine's owner must confirm this device there), 'code' (confirmed with the machine's code) or
// 'keys' (the machine sent this device a signed key since: it accepted this device).
export function bridgeState(bridge) {
  if (!bridge || !bridge.confirmed_by_me) return 'unverified';
  const record = records()[bridge.id];
  if (record && record.keys_at) return 'keys';
  if (!record) return 'earlier';
  return record.how === 'code' ? 'code' : 'waiting';
}

// A grant this device took as 'signed' from a bridge: that bridge accepted this device when it made it.
function noteSignedGrant(k) {
  const all = records();
  const record = all[k.wrapped_by_device_id];
  // A wrap fetched back from before this confirmation (or from before this page, when the confirmation
  // is older than this release) says nothing of now; an event carries no date and is now.
  const since = (record ? record.at : loadedAt) - CLOCK_SKEW_MS;
  if ((k.created_at || Date.now()) < since || (record && record.keys_at)) return;
  all[k.wrapped_by_device_id] = { ...(record || { how: 'earlier', at: Date.now() }), keys_at: Date.now() };
  saveRecords(all);
  changed(null);
}

// The enrolment codes this tab holds, until used: sessionStorage, keyed by the installation (or the
// bridge device) the link named. Never sent to relayd: only the proof made from one is.
const HELD = 'relay.enrol-code.';
const PAIRING = 'relay.enrol-pairing';

function session() {
  try {
    return globalThis.sessionStorage || null;
  } catch (err) {
    return null; // storage disabled: codes are typed, not kept
  }
}

export function holdEnrolCode(target, code) {
  const { code: normal } = normaliseEnrolCode(code);
  // A malformed code from a link is kept as it came, for the field to show and say what is wrong.
  if (target && session()) session().setItem(HELD + target, normal ? groupEnrolCode(normal) : String(code).slice(0, 64));
}

export function heldEnrolCode(...targets) {
  for (const t of targets) {
    const code = t && session() ? session().getItem(HELD + t) : null;
    if (code) return code;
  }
  return null;
}

export function dropEnrolCode(...targets) {
  for (const t of targets) if (t && session()) session().removeItem(HELD + t);
}

// The pairing link's #enrol=: kept for the installation the claim of that pairing code returns.
export function holdPairingEnrol(pairCode, code) {
  if (session()) session().setItem(PAIRING, JSON.stringify({ pair: String(pairCode).toUpperCase().replace(/[\s-]+/g, ''), code }));
}

export function bindPairingEnrol(pairCode, installationId) {
  const store = session();
  if (!store) return false;
  let held = null;
  try {
    held = JSON.parse(store.getItem(PAIRING) || 'null');
  } catch (err) {
    held = null;
  }
  store.removeItem(PAIRING);
  // Only the claim of the code the link carried: a code typed by hand is another machine's pairing.
  if (!held || held.pair !== String(pairCode).toUpperCase().replace(/[\s-]+/g, '')) return false;
  holdEnrolCode(installationId, held.code);
  return true;
}

// Confirms a bridge from this device. With the machine's code, the proof goes along and the machine
// accepts this device on its own; without, its owner must confirm it there. Either way the keys of the
// chats this device encrypted on that machine meanwhile are granted to it again: a bridge refuses the
// grants of a device it has not accepted yet, and takes them once it has (after this confirmation in
// the order of its updates, when the code is right).
export async function confirmBridge(bridgeDeviceId, code = null, sessions = []) {
  const bridge = e2e.devices.find((d) => d.id === bridgeDeviceId);
  const before = bridgeState(bridge);
  const body = { bridge_device_id: bridgeDeviceId };
  if (code) {
    body.enrol_proof = await enrolProof(code, { bridgeDeviceId, deviceId: e2e.device.device_id, devicePublicHex: e2e.device.public_key });
  }
  await post(`/v1/me/devices/${encodeURIComponent(e2e.device.device_id)}/confirm`, body);
  const all = records();
  all[bridgeDeviceId] = { how: code ? 'code' : 'machine', at: Date.now() };
  saveRecords(all);
  await refreshDevices();
  if (bridge && before !== 'unverified') await regrant(bridge, sessions);
}

// At start: a machine still waiting for its owner to confirm this device refused the keys of the chats
// this device encrypted on it since; they are granted again, and taken once the owner has confirmed.
export async function regrantWaiting(sessions) {
  if (!e2e.device) return;
  const all = records();
  for (const bridge of bridges()) {
    const record = all[bridge.id];
    if (bridgeState(bridge) !== 'waiting') continue;
    await regrant(bridge, sessions.filter((s) => !s.created_at || s.created_at >= record.at - CLOCK_SKEW_MS));
  }
}

// The newest key of each encrypted chat this device holds on the bridge's machine, wrapped and signed
// for the bridge again (the relay keeps one wrap per session and device: this one replaces the last).
async function regrant(bridge, sessions) {
  for (const s of sessions) {
    const [key] = keysOf(s.id);
    if (!s.encrypted || !key || s.installation_id !== bridge.installation_id) continue;
    try {
      const wrapped = await wrapKey(key, bridge.pubkey);
      const sig = await grantSig(e2e.device.secret_key, fromHex(bridge.pubkey), { sessionId: s.id, wrapped, deviceId: e2e.device.device_id });
      await post(`/v1/me/sessions/${encodeURIComponent(s.id)}/recipients`,
        { recipients: [{ device_id: bridge.id, wrapped_session_key: wrapped, grant_sig: sig }], wrapped_by_device_id: e2e.device.device_id });
    } catch (err) {
      console.warn(`relay: the key of ${s.id} could not be granted to the machine again`, err);
    }
  }
}

// ---- session keys ----

async function keep(sessionId, key, at, trust = 'signed') {
  const placed = await keystore.addSessionKey(sessionId, key, at, trust);
  e2e.keys.set(sessionId, placed.keys);
  return placed.taken;
}

function sameText(a, b) {
  if (typeof a !== 'string' || typeof b !== 'string' || a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

// How far this device trusts a grant addressed to it (docs/api.md "Signed grants"): 'signed' by a bridge
// it confirmed or by itself, 'unsigned', 'peer' (another client device of the user) or 'forged'.
export async function grantTrust(k) {
  const by = k.wrapped_by_device_id;
  const self = !!by && by === e2e.device.device_id;
  let signer = self ? null : e2e.devices.find((d) => d.id === by);
  // A device added since the list was read, or a bridge confirmed since: relay-bridge grants the keys the
  // moment it hears of the confirmation, which can be before confirmBridge has read the list again.
  if (!self && by && (!signer || (signer.platform === 'bridge' && !signer.confirmed_by_me))) {
    await refreshDevices();
    signer = e2e.devices.find((d) => d.id === by);
  }
  if (!self && (!signer || signer.revoked_at)) return 'forged';
  if (signer && signer.platform !== 'bridge') return k.grant_sig ? 'forged' : 'peer';
  if (signer && !signer.confirmed_by_me) return 'forged';
  if (!k.grant_sig) return self ? 'peer' : 'unsigned';
  const pub = fromHex(self ? e2e.device.public_key : signer.pubkey);
  const sig = await grantSig(e2e.device.secret_key, pub, { sessionId: k.session_id, wrapped: k.wrapped_session_key, deviceId: by });
  return sameText(sig, k.grant_sig) ? 'signed' : 'forged';
}

let since = null;

export async function fetchKeys() {
  if (!e2e.device) return;
  const query = since ? `?since=${encodeURIComponent(since)}` : '';
  const result = await get(`/v1/me/devices/${encodeURIComponent(e2e.device.device_id)}/keys${query}`);
  for (const k of result.keys || []) {
    await grant(k);
    if (k.created_at && (!since || k.created_at > since)) since = k.created_at;
  }
}

// A wrap addressed to this device (from the keys route, or an SSE session_key_granted).
export async function grant(k) {
  if (!e2e.device || !k || !k.session_id || !k.wrapped_session_key) return false;
  if (k.device_id && k.device_id !== e2e.device.device_id) return false;
  let key = null;
  try {
    key = await unwrapKey(k.wrapped_session_key, e2e.device.secret_key);
  } catch (err) {
    key = null;
  }
  if (!key) {
    console.warn(`relay: a key for ${k.session_id} does not open with this device's key`);
    return false;
  }
  const trust = await grantTrust(k);
  const taken = await keep(k.session_id, key, Date.now(), trust);
  if (taken === 'refused') {
    console.warn(`relay: a key for ${k.session_id} from ${k.wrapped_by_device_id || 'nobody named'} was refused (${trust}): this device seals with the key it holds`);
    return false;
  }
  if (trust === 'signed' && k.wrapped_by_device_id !== e2e.device.device_id
    && e2e.devices.some((d) => d.id === k.wrapped_by_device_id && d.platform === 'bridge')) noteSignedGrant(k);
  // First key of a session from an unsigned grant: trusted on first use (the authors' bridge does not sign).
  if (taken === 'seal' && trust !== 'signed') e2e.firstUse.add(k.session_id);
  if (taken === 'seal' && trust === 'signed') e2e.firstUse.delete(k.session_id);
  if (taken !== 'known') changed(k.session_id);
  return taken !== 'known';
}

// Wraps a session key for the session's bridge, this device and the user's other client devices.
async function distribute(sessionId, installationId, key) {
  const bridge = bridgeOf(installationId);
  // Its own wrap signed too: fetched back on another load, it verifies as this device's (docs/api.md "Signed grants").
  const mine = await wrapKey(key, e2e.device.public_key);
  const ownSig = await grantSig(e2e.device.secret_key, fromHex(e2e.device.public_key), { sessionId, wrapped: mine, deviceId: e2e.device.device_id });
  const first = [{ device_id: e2e.device.device_id, wrapped_session_key: mine, grant_sig: ownSig }];
  if (bridge) {
    // Signed for the bridge, which takes a key only from a device it can tell made the wrap.
    const wrapped = await wrapKey(key, bridge.pubkey);
    const sig = await grantSig(e2e.device.secret_key, fromHex(bridge.pubkey), { sessionId, wrapped, deviceId: e2e.device.device_id });
    first.push({ device_id: bridge.id, wrapped_session_key: wrapped, grant_sig: sig });
  }
  const path = `/v1/me/sessions/${encodeURIComponent(sessionId)}/recipients`;
  await post(path, { recipients: first, wrapped_by_device_id: e2e.device.device_id });
  // Each other device alone: one that has not confirmed this bridge is refused, and only it.
  const others = e2e.devices.filter((d) => d.platform !== 'bridge' && !d.revoked_at && d.id !== e2e.device.device_id);
  for (const d of others) {
    try {
      await post(path, { recipients: [{ device_id: d.id, wrapped_session_key: await wrapKey(key, d.pubkey) }], wrapped_by_device_id: e2e.device.device_id });
    } catch (err) {
      if (err.status !== 409 && err.status !== 404) throw err;
    }
  }
}

// A new encrypted session: the key made here, kept, then wrapped. Returns the session. fields: the plain
// ones of the start (agent, resume), and `project`, sealed here with the new key as project_ct.
export async function createSession(installationId, title, fields = {}) {
  const key = randomBytes(32);
  const { project, ...plain } = fields;
  const body = { installation_id: installationId, encrypted: true, ...plain };
  if (project) body.project_ct = await sealProject(key, project);
  const result = await post('/v1/me/sessions', body);
  const session = project ? { ...result.session, project_opened: project } : result.session;
  await keep(session.id, key, Date.now());
  await distribute(session.id, installationId, key);
  // The title is sealed under the session's id, which the relay gives: it follows the create.
  if (title) {
    try {
      const r = await patch(`/v1/me/sessions/${encodeURIComponent(session.id)}`, { title_ct: await sealTitle(key, session.id, title) });
      return { ...session, ...((r && r.session) || {}), title };
    } catch (err) {
      // The chat exists and is encrypted; only its title is missing (Rename sets it).
      console.warn('relay: the encrypted title could not be set', err);
    }
  }
  return session;
}

// After a device is revoked: each encrypted session this device holds a key of gets a new key,
// for the devices that remain; the old keys stay, to read what they sealed.
export async function rotate(sessions) {
  let rotated = 0;
  for (const s of sessions) {
    if (!s.encrypted || !hasKey(s.id)) continue;
    const key = randomBytes(32);
    await keep(s.id, key, Date.now());
    try {
      await distribute(s.id, s.installation_id, key);
      rotated++;
    } catch (err) {
      console.warn(`relay: the key of ${s.id} could not be rotated`, err);
    }
  }
  return rotated;
}

export async function revoke(deviceId, sessions) {
  await del(`/v1/me/devices/${encodeURIComponent(deviceId)}`);
  await refreshDevices();
  if (e2e.device) return rotate(sessions);
  return 0;
}

// ---- what the rest of the app sends and reads ----

// An ApiError, so that the outbox shows it on the message (with Retry) rather than waiting for the relay.
const missingKey = () => new ApiError(409, { error: { code: 'e2e_key_missing', message: 'This device does not have the key of this chat yet.' } });

// A send's body for a session: text_ct instead of text in an encrypted one.
export async function sendBody(session, body) {
  if (!session || !session.encrypted) return body;
  const [key] = keysOf(session.id);
  if (!key) throw missingKey();
  return sealSend(key, session.id, body);
}

export async function titleBody(session, title) {
  if (!session || !session.encrypted) return { title };
  const [key] = keysOf(session.id);
  if (!key) throw missingKey();
  return { title_ct: await sealTitle(key, session.id, title) };
}

// An approval decision's body, with decision_sig in an encrypted session (decision.js, shared with the service worker).
export async function decisionBody(approval, session, body) {
  if (!session || !session.encrypted) return body;
  const signed = await signedDecision(approval, e2e.device, bridgeOf(session.installation_id), body);
  if (!signed) {
    throw new ApiError(409, { error: { code: 'e2e_unverified', message: 'This device cannot sign decisions for this machine yet: verify the machine in Settings, Devices.' } });
  }
  return signed;
}

// A config change's body (POST /v1/me/sessions/:id/config): in an encrypted session signed by this
// device (decision.js, as decisions are), with ts the relay's time as the page knows it.
export async function configBody(session, option, ts) {
  if (!session || !session.encrypted) return { option };
  const signed = await signedConfig(session.id, option, e2e.device, bridgeOf(session.installation_id), ts);
  if (!signed) {
    throw new ApiError(409, { error: { code: 'e2e_unverified', message: 'This device cannot sign changes for this machine yet: verify the machine in Settings, Devices.' } });
  }
  return signed;
}

// The device id a machine's live lists (projects, the agent's sessions) are sealed to: this device's,
// when it has one; without it the bridge answers only if its owner let it answer in clear.
export const listDevice = () => (e2e.device && e2e.device.device_id) || null;

// A bridge's answer to a list request (docs/api.md "Projects"): as it came when plain, else opened with
// this device's secret and the machine's bridge key. Sealed by another device than that machine's bridge,
// to another device, or not opening: refused, so that the relay can neither read nor forge the list.
export async function openBridgeAnswer(installationId, answer) {
  if (!answer || typeof answer.sealed !== 'string') return answer;
  const bridge = bridgeOf(installationId);
  const problem = !e2e.device ? 'this browser has no device key'
    : answer.to_device_id !== e2e.device.device_id ? 'it was sealed for another device'
      : !bridge || answer.from_device_id !== bridge.id ? 'it was not sealed by this machine\'s bridge'
        : !bridge.confirmed_by_me ? 'this machine is not verified on this device' : null;
  if (problem) throw new ApiError(409, { error: { code: 'e2e_unverified', message: `The machine's answer cannot be read: ${problem}.` } });
  let text = null;
  try {
    text = openFromPeer(answer.sealed, e2e.device.secret_key, fromHex(bridge.pubkey));
  } catch (err) {
    if (!(err instanceof EnvelopeError)) throw err;
  }
  let value = null;
  try {
    value = text === null ? null : JSON.parse(text);
  } catch (err) {
    value = null;
  }
  if (!value || typeof value !== 'object') {
    throw new ApiError(409, { error: { code: 'e2e_open_failed', message: 'The machine\'s answer does not open with this device\'s key.' } });
  }
  return value;
}

export function openStreamEvent(name, data) {
  if (name === 'session_key_granted') return Promise.resolve(data);
  return openEvent(keysOf(eventSession(name, data)), name, data);
}

export const openPageMessage = (sessionId, m) => openMessage(keysOf(sessionId), sessionId, m);
export const openPageItem = (sessionId, item) => openTimelineItem(keysOf(sessionId), sessionId, item);
export const openPending = (a) => openApproval(keysOf(a.session_id), a.session_id, a);
export const openSessionRow = (s) => openSession(keysOf(s.id), s);
export const openCapability = (r) => openCapabilityRequest(keysOf(r.session_id), r.session_id, r);

// A capability answer's body: in an encrypted session the location (or the photo's description)
// goes sealed as answer_ct; the relay refuses it in clear there.
export async function answerBody(session, body) {
  const { location, attachment, ...rest } = body;
  if (!session || !session.encrypted || body.refused) return location ? { ...rest, location } : rest;
  const [key] = keysOf(session.id);
  if (!key) throw missingKey();
  return { ...rest, answer_ct: await sealAnswer(key, session.id, location ? { location } : { attachment }) };
}

// An upload for a session: in an encrypted one the bytes sealed (application/octet-stream, no
// name) and the entry's meta_ct. Returns { raw, contentType, name (for the query, or null), meta, meta_ct }.
export async function uploadBody(session, file) {
  const name = file.name || 'photo.jpg';
  const mime = file.type || 'application/octet-stream';
  if (!session || !session.encrypted) return { raw: file, contentType: mime, name, meta: null, meta_ct: null };
  const [key] = keysOf(session.id);
  if (!key) throw missingKey();
  const { envelope, meta } = await sealFile(key, session.id, new Uint8Array(await file.arrayBuffer()), name, mime);
  return { raw: envelope, contentType: 'application/octet-stream', name: null, meta, meta_ct: await sealMeta(key, session.id, meta) };
}

// The opened bytes of a sealed attachment entry (docs/web.md): fetched from its url, opened here.
export async function sealedFile(sessionId, a) {
  const response = await fetch(a.url);
  if (!response.ok) throw new Error(`The file could not be fetched (${response.status})`);
  const bytes = await openFile(keysOf(sessionId), sessionId, new Uint8Array(await response.arrayBuffer()), a);
  if (!bytes) throw new Error('This file does not open with the keys of this device');
  return new Blob([bytes], { type: a.mime || 'application/octet-stream' });
}

