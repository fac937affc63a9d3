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
import { openText, sealText, sealBytes, openBytes, sha256Hex, EnvelopeError } from './crypto.js';

export const LOCKED_TEXT = 'Waiting for this device to receive the key…';

// The key paths of the wire, by what a field belongs to.
export const paths = {
  messages: (sid) => `messages/${sid}`,
  tasks: (sid) => `tasks/${sid}`,
  approvals: (sid) => `approvals/${sid}`,
  meta: (sid) => `session_meta/${sid}`,
  // Ours (docs/api.md "Device capabilities", "Encrypted sessions"): a request's reason and its
  // answer; an attachment's bytes and its meta_ct {name, mime, size, sha256}.
  capabilities: (sid) => `capabilities/${sid}`,
  attachments: (sid) => `attachments/${sid}`,
  // Ours (issue 36): project_ct goes with POST /v1/me/sessions, before the relay has given the session
  // its id, so its path names none; the session key is new to the session, which keys it apart enough.
  project: () => 'session_meta/project',
};

// Task fields: ciphertext field -> plaintext field, and how the plaintext reads: 'text', 'json', or 'auto'
// for an error, which relay-bridge seals as the text itself when it is a string and as JSON otherwise
// (src/bridge/keyring.c SEAL_AUTO): an object or an array is JSON, anything else the string it was (an
// error "404" or "null" stays that text, as a plain chat shows it).
const TASK_FIELDS = [
  ['status_label_ct', 'status_label', 'text'],
  ['args_ct', 'args', 'json'],
  ['partial_result_ct', 'partial_result', 'json'],
  ['result_ct', 'result', 'json'],
  ['error_ct', 'error', 'auto'],
];

function readField(text, form) {
  if (form === 'text') return text;
  const value = parseJson(text);
  return form === 'auto' && (value === null || typeof value !== 'object') ? text : value;
}

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

// An attachment entry with meta_ct: its real name, type and size, and `sealed` (its url serves the
// envelope: sealedFile opens it). Locked when no key opens the meta.
async function openAttachment(keys, sessionId, a) {
  if (!a || !present(a.meta_ct)) return a;
  const text = await field(keys, paths.attachments(sessionId), a.meta_ct);
  const meta = text === null ? null : parseJson(text);
  if (!meta || typeof meta !== 'object') return { ...a, name: LOCKED_TEXT, sealed: true, locked: true, session_id: sessionId };
  return { ...a, name: meta.name || '', mime: meta.mime || '', size: meta.size || 0, sha256: meta.sha256, sealed: true, session_id: sessionId };
}

export async function openMessage(keys, sessionId, m) {
  if (m && Array.isArray(m.attachments) && m.attachments.some((a) => a && present(a.meta_ct)))
    m = { ...m, attachments: await Promise.all(m.attachments.map((a) => openAttachment(keys, sessionId || m.session_id, a))) };
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
  for (const [ct, plain, form] of TASK_FIELDS) {
    if (!present(t[ct])) continue;
    const text = await field(keys, paths.tasks(sessionId || t.session_id), t[ct]);
    if (text === null) {
      out.locked = true;
      if (plain === 'status_label') out.status_label = LOCKED_TEXT;
      continue;
    }
    out[plain] = readField(text, form);
  }
  return out;
}

// What details_ct holds (relay-bridge seals the plain request's fields there, src/bridge/keyring.c): the
// authors' {title, message, command, host, tool_call_id, approval_slug}, and ours, `content`, the
// blocks a person reviews (an edit's diff). Only these: the plain metadata (action, severity, ids)
// stays the relay's.
const APPROVAL_DETAILS = ['title', 'message', 'command', 'host', 'tool_call_id', 'approval_slug', 'content'];

export async function openApproval(keys, sessionId, a) {
  if (!a || !present(a.details_ct)) return a;
  const text = await field(keys, paths.approvals(sessionId || a.session_id), a.details_ct);
  const details = text === null ? null : parseJson(text);
  if (!details || typeof details !== 'object') return { ...a, title: LOCKED_TEXT, encrypted: true, locked: true };
  const out = { ...a, encrypted: true, locked: false };
  for (const k of APPROVAL_DETAILS) {
    if (details[k] !== undefined && details[k] !== null) out[k] = details[k];
  }
  return out;
}

// A device capability request (the event and the snapshot's entry): reason from reason_ct.
export async function openCapabilityRequest(keys, sessionId, r) {
  if (!r || !present(r.reason_ct)) return r;
  const reason = await field(keys, paths.capabilities(sessionId || r.session_id), r.reason_ct);
  return reason === null ? { ...r, reason: LOCKED_TEXT, encrypted: true, locked: true } : { ...r, reason, encrypted: true, locked: false };
}

// The bridge's agent_state of an encrypted session: its project {id, name, path, branch} sealed as
// project_ct (same path as the start's), opened into `project`; left as it is without one or a key.
export async function openAgentState(keys, state) {
  if (!state || typeof state !== 'object' || !present(state.project_ct)) return state;
  const text = await field(keys, paths.project(), state.project_ct);
  const project = text === null ? null : parseJson(text);
  return project && typeof project === 'object' && !Array.isArray(project) ? { ...state, project } : state;
}

// A session row: title from title_ct, the project it was started in from project_ct as `project_opened`
// {id, worktree_branch?, name?, path?, branch?} (null while no key opens it), and its agent_state's.
export async function openSession(keys, s) {
  const stateCt = !!(s && s.agent_state && typeof s.agent_state === 'object' && present(s.agent_state.project_ct));
  if (!s || (!present(s.title_ct) && !present(s.project_ct) && !stateCt)) return s;
  const out = { ...s };
  if (stateCt) out.agent_state = await openAgentState(keys, s.agent_state);
  if (present(s.title_ct)) {
    const title = await field(keys, paths.meta(s.id), s.title_ct);
    out.title = title === null ? null : title;
    out.title_locked = title === null;
  }
  if (present(s.project_ct)) {
    const text = await field(keys, paths.project(), s.project_ct);
    const project = text === null ? null : parseJson(text);
    out.project_opened = project && typeof project === 'object' && !Array.isArray(project) ? project : null;
  }
  return out;
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
    case 'device_capability_request':
      return openCapabilityRequest(keys, d.session_id, d);
    case 'session_state':
      return d.agent_state ? { ...d, agent_state: await openAgentState(keys, d.agent_state) } : d;
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

// A capability answer in an encrypted session: {location} (or a photo's {attachment}) sealed as answer_ct.
export async function sealAnswer(key, sessionId, answer) {
  return sealText(key, paths.capabilities(sessionId), JSON.stringify(answer));
}

// A file for an encrypted session: the envelope to upload (application/octet-stream, no name) and
// what describes it, {name, mime, size, sha256}, which the bridge checks the opened bytes against.
export async function sealFile(key, sessionId, bytes, name, mime) {
  const meta = { name, mime, size: bytes.length, sha256: await sha256Hex(bytes) };
  return { envelope: await sealBytes(key, paths.attachments(sessionId), bytes), meta };
}

export async function sealMeta(key, sessionId, meta) {
  return sealText(key, paths.attachments(sessionId), JSON.stringify(meta));
}

// The bytes of a sealed attachment (its envelope as downloaded), or null when no key opens them
// or they are not the ones its meta names.
export async function openFile(keys, sessionId, envelope, meta) {
  const bytes = await openBytes(keys || [], paths.attachments(sessionId), envelope);
  if (!bytes || (meta && meta.sha256 && (await sha256Hex(bytes)) !== meta.sha256)) return null;
  return bytes;
}

// A new session's project as project_ct (paths.project), sealed with the key made for it.
export async function sealProject(key, project) {
  return sealText(key, paths.project(), JSON.stringify(project));
}

export async function sealTitle(key, sessionId, title) {
  return title ? sealText(key, paths.meta(sessionId), title) : null;
}
