// The records of an encrypted session (docs/api.md "Encrypted sessions") as
// the rest of the app reads them: each `*_ct` field opened into the plaintext
// field it stands for, with the session's keys (newest first; a rotated
// session keeps its old ones). Pure: the keys come in as arguments, and
// nothing here touches storage or the network (tests/browser/unit/sealed.test.js).
//
// A record whose key this device does not have (yet) is never an error: it
// reads LOCKED_TEXT and carries `locked: true`, and is read again when the key
// arrives (e2e.js, session_key_granted). A record without any `*_ct` field is
// returned as it is: plain sessions go through unchanged.
import { openText, sealText, EnvelopeError } from './crypto.js';

export const LOCKED_TEXT = 'Waiting for this device to receive the key…';

// The key paths of the wire, by what a field belongs to.
export const paths = {
  messages: (sid) => `messages/${sid}`,
  tasks: (sid) => `tasks/${sid}`,
  approvals: (sid) => `approvals/${sid}`,
  meta: (sid) => `session_meta/${sid}`,
};

// Task fields: ciphertext field -> plaintext field, and whether the plaintext is JSON text.
const TASK_FIELDS = [
  ['status_label_ct', 'status_label', false],
  ['args_ct', 'args', true],
  ['partial_result_ct', 'partial_result', true],
  ['result_ct', 'result', true],
  ['error_ct', 'error', true],
];

const present = (v) => typeof v === 'string' && v !== '';

// The text of one field, or null (no key opens it, or it is not an envelope).
async function field(keys, path, b64) {
  if (!keys || !keys.length) return null;
  try {
    return await openText(keys, path, b64);
  } catch (err) {
    if (err instanceof EnvelopeError) return null;
    throw err;
  }
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    return text;
  }
}

export async function openMessage(keys, sessionId, m) {
  if (!m || (!present(m.text_ct) && !Array.isArray(m.deltas_ct))) return m;
  const path = paths.messages(sessionId || m.session_id);
  let text = present(m.text_ct) ? await field(keys, path, m.text_ct) : '';
  for (const delta of Array.isArray(m.deltas_ct) ? m.deltas_ct : []) {
    if (text === null) break;
    const piece = await field(keys, path, delta);
    text = piece === null ? null : text + piece;
  }
  if (text === null) return { ...m, text: LOCKED_TEXT, encrypted: true, locked: true };
  return { ...m, text, encrypted: true, locked: false };
}

// A message_delta event: `delta` from `delta_ct`, or locked.
export async function openDelta(keys, d) {
  if (!d || !present(d.delta_ct)) return d;
  const delta = await field(keys, paths.messages(d.session_id), d.delta_ct);
  return delta === null ? { ...d, delta: '', locked: true } : { ...d, delta, locked: false };
}

export async function openTask(keys, sessionId, t) {
  if (!t || !TASK_FIELDS.some(([ct]) => present(t[ct]))) return t;
  const out = { ...t, encrypted: true, locked: false };
  for (const [ct, plain, json] of TASK_FIELDS) {
    if (!present(t[ct])) continue;
    const text = await field(keys, paths.tasks(sessionId || t.session_id), t[ct]);
    if (text === null) {
      out.locked = true;
      if (plain === 'status_label') out.status_label = LOCKED_TEXT;
      continue;
    }
    out[plain] = json ? parseJson(text) : text;
  }
  return out;
}

// details_ct is JSON {title, message, command, host, tool_call_id, approval_slug}.
export async function openApproval(keys, sessionId, a) {
  if (!a || !present(a.details_ct)) return a;
  const text = await field(keys, paths.approvals(sessionId || a.session_id), a.details_ct);
  const details = text === null ? null : parseJson(text);
  if (!details || typeof details !== 'object') return { ...a, title: LOCKED_TEXT, encrypted: true, locked: true };
  const out = { ...a, encrypted: true, locked: false };
  for (const k of ['title', 'message', 'command', 'host', 'tool_call_id', 'approval_slug']) {
    if (details[k] !== undefined && details[k] !== null) out[k] = details[k];
  }
  return out;
}

export async function openSession(keys, s) {
  if (!s || !present(s.title_ct)) return s;
  const title = await field(keys, paths.meta(s.id), s.title_ct);
  return { ...s, title: title === null ? null : title, title_locked: title === null };
}

// A timeline item (transcript.js timelineEntry's shapes).
export async function openTimelineItem(keys, sessionId, item) {
  if (!item || typeof item !== 'object') return item;
  if (item.type === 'message' && item.message) return { ...item, message: await openMessage(keys, sessionId, item.message) };
  if (item.type === 'task' && item.task) return { ...item, task: await openTask(keys, sessionId, item.task) };
  if (item.type === 'approval' && item.approval) return { ...item, approval: await openApproval(keys, sessionId, item.approval) };
  return item;
}

// The session a stream event belongs to, for picking its keys.
export function eventSession(name, d) {
  if (!d) return null;
  if (d.session && d.session.id) return d.session.id;
  return d.session_id || null;
}

// A stream event with its ciphertext opened. keys: the keys of eventSession(name, d).
export async function openEvent(keys, name, d) {
  if (!d || typeof d !== 'object') return d;
  switch (name) {
    case 'message_added':
    case 'message_finalized':
      return openMessage(keys, d.session_id, d);
    case 'message_delta':
      return openDelta(keys, d);
    case 'task_created':
    case 'task_progress':
    case 'task_completed':
    case 'task_failed':
    case 'task_cancelled':
      return openTask(keys, d.session_id, d);
    case 'approval_requested':
      return openApproval(keys, d.session_id, d);
    case 'session_created':
    case 'session_renamed':
    case 'session_updated':
      return d.session ? { ...d, session: await openSession(keys, d.session) } : d;
    default:
      return d;
  }
}

// What a client sends in an encrypted session: text_ct for the text, title_ct for a title.
export async function sealSend(key, sessionId, body) {
  const { text, ...rest } = body;
  return { ...rest, text_ct: await sealText(key, paths.messages(sessionId), text || '') };
}

export async function sealTitle(key, sessionId, title) {
  return title ? sealText(key, paths.meta(sessionId), title) : null;
}
