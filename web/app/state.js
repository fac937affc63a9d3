// What the app knows, and how the relay's events change it. Views subscribe
// to topics ('sessions', 'installations', 'messages:<session>', 'approvals',
// 'grants', 'connection') and redraw what changed.
//
// Resume (spec "Client-side resume"): on start /v1/me, the open session's
// history, then /v1/me/snapshot, then the stream; each pending approval of
// the snapshot is handled like a live approval_requested, by approval_id; a
// resync reloads the same; an interaction that was in flight when the stream
// dropped is polled every 3 s for up to 24 s.
//
// A reply the history shows mid-stream (a reload during a reply) is not
// extended with live deltas: the deltas published between the history read
// and the stream's start reach neither, so appending the later ones would
// leave a hole. Its text comes from polling the history (every 3 s, as the
// spec allows) until message_finalized brings the canonical text.
//
// A chat's history is its timeline (GET /v1/me/sessions/:id/timeline):
// messages, tool calls and approvals with their decisions, in the order they
// happened, so that a reload shows the conversation as it was. A relayd
// older than that route answers 404 not_found; the app then reads the
// messages alone (GET .../messages), as before. How copies from the pages
// and the stream merge is transcript.js's.
import { get } from './api.js';
import { openPageItem, openPageMessage, openPending, openSessionRow, openCapability } from './e2e.js';
import { mergeTask, mergeApproval, mergePageMessage, timelineEntry, liveAt, pinBefore, endsTurn, ties, isHiddenMessage } from './transcript.js';

const POLL_EVERY_MS = 3000;
const POLL_FOR_MS = 24000;
// A reply the history caught mid-stream is followed by polling until it ends, at most this long.
const FOLLOW_FOR_MS = 10 * 60 * 1000;
const HISTORY_PAGE = 50;

export const store = {
  user: null,
  installations: new Map(),
  sessions: new Map(),
  deleted: new Map(), // sessions deleted and still restorable
  chats: new Map(), // session id -> { messages: Map, order: [], tasks: Map, loaded, hasMore, cursor }
  timeline: null, // whether the relay serves the timeline route: null until known
  skew: null, // the relay's clock minus ours (at least), from the stream's hello and heartbeats
  approvals: new Map(),
  grants: [],
  connection: 'idle',
  reachable: true, // false from a drop of the stream until it is live again
  retryInMs: 0,
  listeners: new Map(),
  polls: new Map(),
  previews: new Map(), // session id -> its latest message, read for the chat list (GET .../messages?limit=)
};

export function on(topic, fn) {
  if (!store.listeners.has(topic)) store.listeners.set(topic, new Set());
  store.listeners.get(topic).add(fn);
  return () => store.listeners.get(topic).delete(fn);
}

export function emit(topic, detail) {
  const set = store.listeners.get(topic);
  if (set) for (const fn of [...set]) fn(detail);
  const any = store.listeners.get('*');
  if (any) for (const fn of [...any]) fn(topic, detail);
}

export function chat(sessionId) {
  let c = store.chats.get(sessionId);
  if (!c) {
    c = { messages: new Map(), order: [], tasks: new Map(), loaded: false, hasMore: false, cursor: null, loading: null, lastAt: 0 };
    store.chats.set(sessionId, c);
  }
  return c;
}

// Order among items of one millisecond (transcript.js ties).
const tie = ties();

function sortOrder(c) {
  c.order = [...c.messages.values()]
    .sort((a, b) => a.created_at - b.created_at || (a.tie || 0) - (b.tie || 0) || (a.message_id < b.message_id ? -1 : 1))
    .map((m) => m.message_id);
}

function putMessage(message) {
  const c = chat(message.session_id);
  const known = c.messages.get(message.message_id);
  // Seen from its start on the stream, a message follows its deltas.
  if (!known) message = { ...message, fromHistory: false, tie: tie.live() };
  // A delta may have arrived for a message the history read missed; the longer text wins while it streams.
  if (known && known.state === 'final' && message.state !== 'final') return;
  c.messages.set(message.message_id, { ...known, ...message });
  if (!known) sortOrder(c);
  emit(`messages:${message.session_id}`, message.message_id);
}

function putSession(session) {
  if (!session || !session.id) return;
  // An event's copy without the agent's state, or with its project still sealed to this device, keeps what was known.
  const known = store.sessions.get(session.id);
  if (known) {
    if (session.agent_state === undefined && known.agent_state !== undefined) session = { ...session, agent_state: known.agent_state };
    if (!session.project_opened && known.project_opened) session = { ...session, project_opened: known.project_opened };
  }
  if (session.deleted_at) {
    store.sessions.delete(session.id);
    store.deleted.set(session.id, session);
  } else {
    store.deleted.delete(session.id);
    store.sessions.set(session.id, session);
  }
  emit('sessions');
}

// The relay's time now, as well as the app can tell. Each hello and heartbeat
// carries the relay's time when it was sent, so ts - now is at most the true
// offset; the largest seen is the closest.
export function relayNow() {
  return Date.now() + (store.skew || 0);
}

function clockSample(ts) {
  if (typeof ts !== 'number') return;
  const offset = ts - Date.now();
  if (store.skew === null || offset > store.skew) store.skew = offset;
}

// The date of a task or approval the stream brings now (transcript.js liveAt).
function stampLive(sessionId) {
  const c = chat(sessionId);
  c.lastAt = liveAt(c.lastAt, relayNow());
  return c.lastAt;
}

// A dated item (a message, an approval) arrived from the stream: the undated ones that arrived before it happened before it.
function noteDated(sessionId, at) {
  const c = chat(sessionId);
  if (typeof at !== 'number') return;
  if (at > c.lastAt) c.lastAt = at;
  const all = [...c.tasks.values(), ...[...store.approvals.values()].filter((a) => a.session_id === sessionId)];
  const undated = all.filter((v) => !v.created_at && !v.ts);
  let datedBefore = -Infinity;
  for (const v of [...c.messages.values(), ...all]) {
    const when = v.created_at || v.ts;
    if (when && when < at && when > datedBefore) datedBefore = when;
  }
  pinBefore(undated, at, datedBefore);
}

function putApproval(approval) {
  const known = store.approvals.get(approval.approval_id);
  const merged = mergeApproval(known, approval);
  merged.seen_at = (known && known.seen_at) || stampLive(approval.session_id);
  store.approvals.set(approval.approval_id, merged);
  emit('approvals', approval.approval_id);
  emit(`messages:${approval.session_id}`);
}

export function applyMe(me) {
  store.user = me.user;
  store.installations = new Map(me.installations.map((i) => [i.id, i]));
  store.sessions = new Map(me.sessions.map((s) => [s.id, s]));
  emit('installations');
  emit('sessions');
}

export function applySnapshot(snapshot) {
  for (const approval of snapshot.pending_approvals || []) putApproval({ ...approval, status: 'pending' });
  // Pending ones we knew of that the snapshot no longer lists were decided or expired meanwhile.
  const pending = new Set((snapshot.pending_approvals || []).map((a) => a.approval_id));
  for (const approval of store.approvals.values()) {
    if (approval.status === 'pending' && !pending.has(approval.approval_id)) {
      approval.status = approval.expires_at <= Date.now() ? 'expired' : 'resolved';
      emit('approvals', approval.approval_id);
      emit(`messages:${approval.session_id}`);
    }
  }
  // Modules with requests of their own (capabilities.js) read the rest of it.
  emit('snapshot', snapshot);
}

// The handlers of the stream's events.
const handlers = {
  hello: (d) => clockSample(d.ts),
  heartbeat: (d) => clockSample(d.ts),
  installation_created: (d) => setInstallation(d.installation),
  installation_updated: (d) => setInstallation(d.installation),
  installation_revoked: (d) => setInstallation(d.installation),
  agent_health_changed: (d) => {
    const inst = store.installations.get(d.installation_id);
    if (inst) setInstallation({ ...inst, health: d.status });
  },
  session_created: (d) => putSession(d.session),
  session_renamed: (d) => putSession(d.session),
  session_updated: (d) => putSession(d.session),
  // The bridge's word on the session's agent (issue 36): ready, refused, its mode and options, its usage.
  session_state: (d) => {
    const known = d && store.sessions.get(d.session_id);
    if (known) putSession({ ...known, agent_state: d.agent_state || null });
  },
  session_deleted: (d) => {
    const known = store.sessions.get(d.session_id) || store.deleted.get(d.session_id) || { id: d.session_id };
    putSession({ ...known, ...(d.session || {}), deleted_at: d.deleted_at, restore_until: d.restore_until });
  },
  message_added: (d) => {
    if (!chat(d.session_id).messages.has(d.message_id)) noteDated(d.session_id, d.created_at);
    putMessage(d);
  },
  message_finalized: (d) => {
    putMessage(d);
    stopPoll(d.session_id, d.interaction_id);
  },
  message_delta: (d) => {
    const c = chat(d.session_id);
    const message = c.messages.get(d.message_id);
    if (!message) {
      // The history will bring it; meanwhile the delta has nowhere to go.
      return;
    }
    if (message.state === 'final' || message.fromHistory) return;
    // A delta this device has no key for: the message stays locked until the key comes and the history is read again.
    if (d.locked || message.locked) {
      message.locked = true;
      emit(`messages:${d.session_id}`, d.message_id);
      return;
    }
    // A placeholder reads " " until its first delta replaces it.
    message.text = message.placeholder_pending === false || message.text !== ' ' ? message.text + d.delta : d.delta;
    message.placeholder_pending = false;
    emit(`messages:${d.session_id}`, d.message_id);
  },
  task_created: (d) => putTask(d, 'created'),
  task_progress: (d) => putTask(d, 'progressing'),
  task_completed: (d) => putTask(d, 'completed'),
  task_failed: (d) => putTask(d, 'failed'),
  task_cancelled: (d) => putTask(d, 'cancelled'),
  approval_requested: (d) => {
    // Dated by the relay (`ts`, its creation): what arrived before it happened before it.
    if (!store.approvals.has(d.approval_id)) noteDated(d.session_id, d.created_at || d.ts);
    putApproval({ ...d, status: 'pending' });
  },
  approval_resolved: (d) => {
    const known = store.approvals.get(d.approval_id);
    if (known) putApproval({ approval_id: d.approval_id, session_id: known.session_id, status: 'resolved', decision: d.decision, scope: d.scope });
  },
  approval_expired: (d) => {
    const known = store.approvals.get(d.approval_id);
    if (known && known.status === 'pending') putApproval({ approval_id: d.approval_id, session_id: known.session_id, status: 'expired' });
  },
  grant_revoked: (d) => {
    store.grants = store.grants.filter((g) => g.id !== d.grant_id);
    emit('grants');
  },
};

function setInstallation(installation) {
  if (!installation) return;
  store.installations.set(installation.id, installation);
  emit('installations');
}

// A task event: its name says the status (a task_progress never reopens an ended task: transcript.js).
function putTask(d, status) {
  if (!d || !d.session_id || !d.task_id) return;
  const c = chat(d.session_id);
  const known = c.tasks.get(d.task_id);
  c.tasks.set(d.task_id, mergeTask(known, { ...d, status, seen_at: known ? undefined : stampLive(d.session_id) }));
  emit(`messages:${d.session_id}`);
}

export function applyEvent(name, data) {
  const handler = handlers[name];
  if (handler) handler(data);
  // Events this store does not keep go to the modules that do (capabilities.js), without an import cycle.
  emit(`event:${name}`, data);
}

function putPageMessage(c, message, pageTie) {
  const merged = mergePageMessage(c.messages.get(message.message_id), message);
  if (!merged) return;
  if (merged.tie === undefined) merged.tie = pageTie;
  c.messages.set(message.message_id, merged);
}

// A page of the timeline (newest first): every item merged into what the app knows.
function applyTimeline(sessionId, page) {
  const c = chat(sessionId);
  const items = page.items || [];
  const block = tie.page(items.length);
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const entry = timelineEntry(item);
    if (!entry) continue;
    // What the stream brings next happened after what the relay has dated already.
    if (typeof item.at === 'number' && item.at > c.lastAt) c.lastAt = item.at;
    if (entry.type === 'message') putPageMessage(c, entry.value, block - i);
    else if (entry.type === 'task') {
      const known = c.tasks.get(entry.value.task_id);
      const merged = mergeTask(known, entry.value);
      merged.tie = known && known.tie !== undefined ? known.tie : block - i;
      c.tasks.set(entry.value.task_id, merged);
    }
    else {
      const known = store.approvals.get(entry.value.approval_id);
      const merged = mergeApproval(known, { session_id: sessionId, ...entry.value });
      merged.seen_at = (known && known.seen_at) || merged.created_at;
      merged.tie = known && known.tie !== undefined ? known.tie : block - i;
      // Read from the past, not answered on this device: the Approvals screen's "Answered here" leaves it out.
      if (!known) merged.fromTimeline = true;
      store.approvals.set(entry.value.approval_id, merged);
    }
  }
}

async function readPage(sessionId, before) {
  const id = encodeURIComponent(sessionId);
  const params = new URLSearchParams({ limit: String(HISTORY_PAGE) });
  if (before) params.set('before', before);
  if (store.timeline !== false) {
    try {
      const page = await get(`/v1/me/sessions/${id}/timeline?${params}`);
      // An encrypted session's items read here as plain ones (sealed.js); without a key, locked.
      page.items = await Promise.all((page.items || []).map((item) => openPageItem(sessionId, item)));
      store.timeline = true;
      applyTimeline(sessionId, page);
      return page;
    } catch (err) {
      // An older relay has no such route: its messages alone, from the first page.
      if (!(err.status === 404 && err.code === 'not_found' && store.timeline === null)) throw err;
      store.timeline = false;
      params.delete('before');
      before = null;
    }
  }
  const page = await get(`/v1/me/sessions/${id}/messages?${params}`);
  page.messages = await Promise.all(page.messages.map((m) => openPageMessage(sessionId, m)));
  const c = chat(sessionId);
  const block = tie.page(page.messages.length);
  page.messages.forEach((message, i) => putPageMessage(c, message, block - i));
  return page;
}

// A page of history (the timeline, or the messages of an older relay), newest first
// from the relay; kept in order here. `older` reads the page before the oldest one read.
export async function loadHistory(sessionId, older = false) {
  const c = chat(sessionId);
  if (c.loading) return c.loading;
  if (older && !c.cursor) return null;
  c.loading = (async () => {
    try {
      const page = await readPage(sessionId, older ? c.cursor : null);
      // A fresh first page (a poll, a resync) leaves alone how far back the reader has gone.
      if (older || !c.loaded) {
        c.hasMore = page.has_more;
        c.cursor = page.has_more ? page.next_cursor : null;
      }
      c.loaded = true;
      sortOrder(c);
      emit(`messages:${sessionId}`);
      emit('approvals');
    } finally {
      c.loading = null;
    }
  })();
  return c.loading;
}

// The interactions of a session whose agent reply is not final yet.
export function inFlight(sessionId) {
  const c = chat(sessionId);
  const open = new Set();
  const done = new Set();
  for (const m of c.messages.values()) {
    if (!m.interaction_id) continue;
    if (endsTurn(m)) done.add(m.interaction_id);
    else if (m.role === 'user' || m.state === 'streaming') open.add(m.interaction_id);
  }
  return [...open].filter((id) => !done.has(id));
}

// spec: if an interaction was in flight, poll the session's messages every 3 s for up to 24 s.
export function pollInFlight(sessionId) {
  for (const interactionId of inFlight(sessionId)) {
    const key = `${sessionId}/${interactionId}`;
    if (store.polls.has(key)) continue;
    const started = Date.now();
    const timer = setInterval(async () => {
      const c = chat(sessionId);
      const replies = [...c.messages.values()].filter((m) => m.interaction_id === interactionId && m.role === 'agent');
      const final = replies.some(endsTurn);
      const following = replies.some((m) => m.state === 'streaming' && m.fromHistory);
      if (final || Date.now() - started > (following ? FOLLOW_FOR_MS : POLL_FOR_MS)) {
        stopPoll(sessionId, interactionId);
        return;
      }
      try {
        await loadHistory(sessionId);
      } catch (err) {
        // The next tick tries again.
      }
    }, POLL_EVERY_MS);
    store.polls.set(key, timer);
  }
}

function stopPoll(sessionId, interactionId) {
  const key = `${sessionId}/${interactionId}`;
  if (store.polls.has(key)) {
    clearInterval(store.polls.get(key));
    store.polls.delete(key);
  }
}

// Cold start and resync: the account, the open chats' history, then the snapshot.
export async function reload(openSessionId) {
  const me = await get('/v1/me');
  me.sessions = await Promise.all(me.sessions.map(openSessionRow));
  applyMe(me);
  const sessions = new Set([...store.chats.keys()].filter((id) => chat(id).loaded));
  if (openSessionId) sessions.add(openSessionId);
  for (const id of sessions) {
    if (store.sessions.has(id)) await loadHistory(id).catch(() => {});
  }
  const snapshot = await get('/v1/me/snapshot');
  snapshot.pending_approvals = await Promise.all((snapshot.pending_approvals || []).map(openPending));
  snapshot.pending_capability_requests = await Promise.all((snapshot.pending_capability_requests || []).map(openCapability));
  applySnapshot(snapshot);
  for (const id of sessions) if (inFlight(id).length) pollInFlight(id);
}

export async function loadDeleted() {
  const result = await get('/v1/me/sessions?state=deleted');
  store.deleted = new Map(result.sessions.map((s) => [s.id, s]));
  emit('sessions');
}

export async function loadGrants() {
  const result = await get('/v1/me/grants');
  store.grants = result.grants;
  emit('grants');
}

export function setConnection(state, detail) {
  store.connection = state;
  if (state === 'offline') store.reachable = false;
  else if (state === 'live') store.reachable = true;
  store.retryInMs = detail && detail.retryInMs ? detail.retryInMs : 0;
  emit('connection');
}

// Whether the relay answers: not while the stream is down (the network, or the relay itself).
// A stream reconnecting after a drop ('connecting') has not reached it yet either.
export function relayReachable() {
  return store.reachable && (typeof navigator === 'undefined' || navigator.onLine !== false);
}

export function installationName(inst) {
  if (!inst) return 'Unknown machine';
  return inst.custom_display_name || inst.host_label || inst.id;
}

// ---- the chat list's previews ----

// A message as one line for the chat list: its first words, markdown's marks left out.
export function previewText(m) {
  if (!m) return '';
  let text = String(m.text || '').replace(/```[^\n]*\n?/g, '').replace(/[*_`#>|~]+/g, '').replace(/\s+/g, ' ').trim();
  if (!text && m.attachments && m.attachments.length) text = m.attachments.length === 1 ? 'An attachment' : `${m.attachments.length} attachments`;
  if (text.length > 120) text = `${text.slice(0, 119)}…`;
  return m.role === 'user' ? `You: ${text}` : text;
}

// The latest message of a session the app knows: from its chat when open or seen on the stream, else from a preview read.
export function lastMessage(sessionId) {
  const c = store.chats.get(sessionId);
  if (c) {
    for (let i = c.order.length - 1; i >= 0; i--) {
      const m = c.messages.get(c.order[i]);
      if (m && !isHiddenMessage(m)) return m;
    }
  }
  return store.previews.get(sessionId) || null;
}

// Whether the agent of a session is at work: a reply still coming, or a request waiting for an approval.
export function agentWorking(sessionId) {
  for (const a of store.approvals.values()) if (a.session_id === sessionId && a.status === 'pending') return 'approval';
  const c = store.chats.get(sessionId);
  if (c) for (const m of c.messages.values()) if (m.role === 'agent' && m.state === 'streaming') return 'reply';
  const last = lastMessage(sessionId);
  return last && last.role === 'agent' && last.state === 'streaming' ? 'reply' : null;
}

const previewsAsked = new Map(); // session id -> the updated_at it was read at

// Reads the latest message of the sessions the app has none of (a few at a time), for the chat list.
export async function loadPreviews(sessions) {
  const wanted = sessions.filter((s) => {
    const c = store.chats.get(s.id);
    if (c && c.order.length) return false;
    return previewsAsked.get(s.id) !== s.updated_at;
  });
  for (const s of wanted) previewsAsked.set(s.id, s.updated_at);
  const queue = [...wanted];
  const worker = async () => {
    for (let s = queue.shift(); s; s = queue.shift()) {
      try {
        const page = await get(`/v1/me/sessions/${encodeURIComponent(s.id)}/messages?limit=5`);
        const shown = (page.messages || []).find((m) => !isHiddenMessage(m));
        if (shown) store.previews.set(s.id, await openPageMessage(s.id, shown));
        else store.previews.delete(s.id);
        emit('previews', s.id);
      } catch (err) {
        previewsAsked.delete(s.id); // tried again on the next draw
      }
    }
  };
  await Promise.all([worker(), worker(), worker()]);
}
