// The outbox: messages written while the relay cannot be reached, kept on this
// device (localStorage, per account) until the relay has them, so that a
// reload or a closed tab loses none.
//
// An entry goes pending -> sending -> gone (the relay answered with its
// message) or back to pending (no answer: the relay was not reached, or the
// answer was lost) or failed (the relay answered with an error: the chat
// shows why, with Retry). A pending entry is sent when the relay is back (the
// stream is live again), oldest first, one at a time.
//
// Each entry is sent with its id as the send's idempotency_key (docs/api.md,
// "Send"): an attempt whose answer was lost may have been stored, and sending
// it again with the same key gets the first answer back instead of a second
// message. Nothing is sent twice, and nothing needs guessing.
//
// The top half is pure (unit-tested under Node); the bottom half keeps the
// list in localStorage and talks to the relay.
import { post, describe } from './api.js';
import { sendBody } from './e2e.js';
import { store, emit } from './state.js';

// An entry the relay keeps answering with a server error stops being retried by itself after this many attempts.
export const MAX_ATTEMPTS = 5;

// ---- pure state logic ----

export function newEntry({ id, sessionId, text, attachments = [], now }) {
  return { id, session_id: sessionId, text, attachments, state: 'pending', created_at: now, attempts: 0, error: null };
}

// The next entry to send: the oldest pending one (entries are kept in the order they were written).
export function nextPending(entries) {
  return entries.find((e) => e.state === 'pending') || null;
}

export function markSending(entries, id, now) {
  return entries.map((e) => (e.id === id ? { ...e, state: 'sending', attempts: e.attempts + 1, tried_at: now } : e));
}

// The relay stored it: out of the outbox.
export function markSent(entries, id) {
  return entries.filter((e) => e.id !== id);
}

// Whether a failed attempt may be repeated by itself: no answer (status 0), or one that says "later".
export function retryable(status) {
  return status === 0 || status === 429 || status >= 500;
}

// An attempt that failed. No answer, or a server error: pending again (the same key makes sending it again safe).
// An error answer that is final (4xx), or too many server errors: failed, with why.
export function markFailed(entries, id, { status, message }) {
  return entries.map((e) => {
    if (e.id !== id) return e;
    if (retryable(status) && (status === 0 || e.attempts < MAX_ATTEMPTS)) return { ...e, state: 'pending', error: null };
    return { ...e, state: 'failed', error: message || 'Not sent' };
  });
}

// Retry (a person asked): pending again, with a fresh count.
export function markRetry(entries, id) {
  return entries.map((e) => (e.id === id && e.state === 'failed' ? { ...e, state: 'pending', attempts: 0, error: null } : e));
}

export function remove(entries, id) {
  return entries.filter((e) => e.id !== id);
}

// A list read back from storage: an entry that was being sent when the page went away may have reached the relay.
export function restore(entries) {
  if (!Array.isArray(entries)) return [];
  return entries.filter((e) => e && typeof e.id === 'string' && typeof e.session_id === 'string' && typeof e.text === 'string')
    .map((e) => (e.state === 'sending' ? { ...e, state: 'pending' } : e));
}

// What the chat shows under an entry.
export function statusText(entry, relayReachable) {
  if (entry.state === 'sending') return 'Sending…';
  if (entry.state === 'failed') return `Not sent: ${entry.error || 'the relay refused it'}`;
  return relayReachable ? 'Waiting to send…' : 'Waiting for the relay to send it';
}

// ---- the outbox of this device ----

let entries = [];
let storageKey = null;
let flushing = null;
let timer = null;
const RETRY_EVERY_MS = 5000;

function save() {
  if (storageKey) {
    try {
      if (entries.length) localStorage.setItem(storageKey, JSON.stringify(entries));
      else localStorage.removeItem(storageKey);
    } catch (err) {
      // Storage full or blocked: the outbox still works for this page.
    }
  }
  emit('outbox');
}

function set(next) {
  entries = next;
  save();
}

// The outbox of an account on this device: read back what a previous page left.
export function startOutbox(userId) {
  const key = `relay.outbox.${userId}`;
  if (storageKey === key) return;
  storageKey = key;
  let stored = [];
  try {
    stored = JSON.parse(localStorage.getItem(key) || '[]');
  } catch (err) {
    stored = [];
  }
  entries = restore(stored);
  save();
  // A short outage the stream did not notice: what waits is tried again now and then.
  if (!timer) timer = setInterval(() => {
    if (nextPending(entries) && store.connection === 'live') flushOutbox();
  }, RETRY_EVERY_MS);
}

export function outboxOf(sessionId) {
  return entries.filter((e) => e.session_id === sessionId);
}

export function pendingCount(sessionId) {
  return entries.filter((e) => e.session_id === sessionId && e.state !== 'failed').length;
}

function randomId() {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes);
  return `out_${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

// Queues a message and sends it now if the relay can be reached.
export function queueMessage(sessionId, text, attachments = []) {
  const entry = newEntry({ id: randomId(), sessionId, text, attachments, now: Date.now() });
  set([...entries, entry]);
  flushOutbox();
  return entry.id;
}

export function retryMessage(id) {
  set(markRetry(entries, id));
  flushOutbox();
}

export function discardMessage(id) {
  set(remove(entries, id));
}

async function sendOne(entry) {
  const id = encodeURIComponent(entry.session_id);
  const body = { text: entry.text, idempotency_key: entry.id };
  // A sealed upload's entry carries its meta_ct (its name and type, sealed): never the plain name.
  if (entry.attachments.length) body.attachments = entry.attachments.map((a) => (a.meta_ct ? { key: a.key, meta_ct: a.meta_ct } : { key: a.key }));
  // In an encrypted session the text leaves this device sealed (text_ct); the outbox keeps it here.
  await post(`/v1/me/sessions/${id}/send`, await sendBody(store.sessions.get(entry.session_id), body));
}

// Sends the pending entries, oldest first; stops at the first one that gets no answer (the relay is away).
export function flushOutbox() {
  if (flushing) {
    flushing.again = true;
    return flushing;
  }
  const run = (async () => {
    for (;;) {
      const entry = nextPending(entries);
      if (!entry) break;
      set(markSending(entries, entry.id, Date.now()));
      try {
        await sendOne(entries.find((e) => e.id === entry.id) || entry);
        set(markSent(entries, entry.id));
      } catch (err) {
        const status = typeof err.status === 'number' ? err.status : 0;
        set(markFailed(entries, entry.id, { status, message: status ? describe(err) : '' }));
        if (status === 0 || retryable(status)) break;
      }
    }
  })();
  flushing = run;
  run.finally(() => {
    const again = run.again;
    flushing = null;
    if (again && nextPending(entries) && store.connection === 'live') flushOutbox();
  });
  return run;
}
