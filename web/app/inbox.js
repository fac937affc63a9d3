// The inbox (docs/web.md "Inbox"): what waits for the user across every
// machine and chat, in one place, with its count on the tab.
//
//   Waiting for you   pending approvals (answerable here, as in the chat) and
//                     device capability requests (answered in their chat)
//   Replies           agent replies that finished while the user was away
//                     from their chat
//   Failed            turns that ended with finish_reason error or
//                     incomplete, and tool calls that failed
//
// "Away" is per chat and per device: each chat has a read mark, the relay's
// time of the latest item the user had in front of them there (the chat open
// and the page visible), kept in localStorage with nothing but session ids
// and times. A reply or failure later than its chat's mark is in the inbox;
// opening the chat (from here or anywhere) reads it. The first time this
// device keeps an inbox for the user, everything before that moment counts
// as read.
//
// What comes live (the stream's message_finalized, task_failed, approvals,
// capability requests) is in the store already. What happened while the app
// was closed is read once the snapshot is (start, resync): the latest page of
// the timeline of the recently updated chats. An encrypted chat's items are
// opened with this device's keys as anywhere else; one it cannot open says
// so. The inbox sends nothing but those reads.
import { get } from './api.js';
import { store, on, emit, relayNow, installationName, previewText } from './state.js';
import { requests as capabilityRequests } from './capabilities.js';
import { approvalCard } from './approvals.js';
import { openPageItem, openPageMessage } from './e2e.js';
import { timelineEntry, isHiddenMessage, errorText } from './transcript.js';
import { h, clear, reconcile, icon, formatTime } from './ui.js';

const FAILED_ENDS = new Set(['error', 'incomplete']);
// Chats whose latest user message is older than their read mark by more than this have nothing new:
// no reply is open for longer than relayd's follow-up window (30 min by default, docs/api.md).
const SCAN_SLACK_MS = 24 * 3600 * 1000;
const SCAN_CHATS = 20;
const SCAN_PAGE = 30;
const MARKS_KEPT = 500;

// ---- the read marks ----

let marks = null; // { user, since, read: { session id: ms } }

// This user's marks on this device; null until the account is read (nothing is read or unread before).
function loadMarks() {
  const user = store.user && store.user.id;
  if (!user) return null;
  if (marks && marks.user === user) return marks;
  let saved = null;
  try {
    saved = JSON.parse(localStorage.getItem(`relay.inbox.${user}`) || 'null');
  } catch (err) {
    saved = null;
  }
  marks = { user, since: saved && typeof saved.since === 'number' ? saved.since : null,
    read: saved && saved.read && typeof saved.read === 'object' ? saved.read : {} };
  return marks;
}

function saveMarks() {
  const m = loadMarks();
  if (!m) return;
  const entries = Object.entries(m.read).sort((a, b) => b[1] - a[1]).slice(0, MARKS_KEPT);
  m.read = Object.fromEntries(entries);
  try {
    localStorage.setItem(`relay.inbox.${m.user}`, JSON.stringify({ since: m.since, read: m.read }));
  } catch (err) {
    // Storage full or blocked: the marks hold for this page.
  }
}

// Before this time (the relay's), a chat's items count as read.
function markOf(sessionId) {
  const m = loadMarks();
  if (!m) return Infinity;
  return Math.max(m.read[sessionId] || 0, m.since || 0);
}

// When an item happened, on the relay's clock: a reply when it ended, a tool call when it last changed.
function messageAt(m) {
  return m.finalized_at || m.created_at || 0;
}

function taskAt(t) {
  return t.updated_at || t.seen_at || t.created_at || 0;
}

// The latest time among what a chat holds: what the user has seen once it is open in front of them.
function latestOf(sessionId) {
  const c = store.chats.get(sessionId);
  let latest = 0;
  if (c) {
    for (const m of c.messages.values()) latest = Math.max(latest, messageAt(m));
    for (const t of c.tasks.values()) latest = Math.max(latest, taskAt(t));
  }
  return latest;
}

function setMark(sessionId, at) {
  const m = loadMarks();
  if (!m || !at || (m.read[sessionId] || 0) >= at) return false;
  m.read[sessionId] = at;
  saveMarks();
  return true;
}

// The chat in front of the user, if any: open, and the page visible.
function openChat() {
  const match = /^#\/s\/([^/?]+)/.exec(location.hash);
  if (!match || document.visibilityState !== 'visible') return null;
  return decodeURIComponent(match[1]);
}

// What the open chat shows is read. relayNow() is never ahead of the relay (state.js), so a
// mark it sets hides nothing that happens later.
function readOpenChat() {
  const sessionId = openChat();
  if (!sessionId) return false;
  const latest = latestOf(sessionId);
  return setMark(sessionId, store.skew === null ? latest : Math.max(latest, relayNow()));
}

export function markAllRead() {
  const m = loadMarks();
  if (!m) return;
  const now = relayNow();
  for (const s of store.sessions.values()) m.read[s.id] = Math.max(m.read[s.id] || 0, latestOf(s.id), latestFetched(s.id), now);
  saveMarks();
  emit('inbox');
}

// ---- what happened while the app was closed ----

const fetched = new Map(); // session id -> { updated_at, locked, messages: Map, tasks: Map }
let scanning = null;

function latestFetched(sessionId) {
  const f = fetched.get(sessionId);
  let latest = 0;
  if (f) {
    for (const m of f.messages.values()) latest = Math.max(latest, messageAt(m));
    for (const t of f.tasks.values()) latest = Math.max(latest, taskAt(t));
  }
  return latest;
}

async function readLatest(sessionId) {
  const id = encodeURIComponent(sessionId);
  const entry = { messages: new Map(), tasks: new Map(), locked: false };
  if (store.timeline !== false) {
    const page = await get(`/v1/me/sessions/${id}/timeline?limit=${SCAN_PAGE}`);
    for (const raw of page.items || []) {
      const item = timelineEntry(await openPageItem(sessionId, raw));
      if (!item) continue;
      if (item.type === 'message') entry.messages.set(item.value.message_id, item.value);
      else if (item.type === 'task') entry.tasks.set(item.value.task_id, item.value);
      if (item.value.locked) entry.locked = true;
    }
  } else {
    const page = await get(`/v1/me/sessions/${id}/messages?limit=${SCAN_PAGE}`);
    for (const raw of page.messages || []) {
      const m = await openPageMessage(sessionId, raw);
      entry.messages.set(m.message_id, m);
      if (m.locked) entry.locked = true;
    }
  }
  return entry;
}

// The recently updated chats whose history the app has not read: their latest page.
async function scan() {
  const sessions = [...store.sessions.values()]
    .filter((s) => (s.updated_at || 0) + SCAN_SLACK_MS >= markOf(s.id))
    .filter((s) => !(store.chats.get(s.id) && store.chats.get(s.id).loaded))
    .filter((s) => {
      const known = fetched.get(s.id);
      return !known || known.updated_at !== s.updated_at || known.locked;
    })
    .sort((a, b) => (b.updated_at || 0) - (a.updated_at || 0))
    .slice(0, SCAN_CHATS);
  const queue = [...sessions];
  const worker = async () => {
    for (let s = queue.shift(); s; s = queue.shift()) {
      try {
        const entry = await readLatest(s.id);
        fetched.set(s.id, { ...entry, updated_at: s.updated_at });
        emit('inbox');
      } catch (err) {
        // Read again at the next snapshot.
      }
    }
  };
  await Promise.all([worker(), worker(), worker()]);
}

on('snapshot', (snapshot) => {
  const m = loadMarks();
  if (!m) return;
  if (m.since === null) {
    // The first inbox on this device: what happened before now counts as read.
    m.since = typeof snapshot.ts === 'number' ? snapshot.ts : relayNow();
    saveMarks();
  }
  if (!scanning) scanning = scan().finally(() => { scanning = null; });
});

// ---- the entries ----

function sessionLabel(s) {
  return (s && s.title) || (s && s.encrypted && s.title_locked ? 'Encrypted chat' : 'Untitled chat');
}

// Every message and task the app has of a chat, the store's copy first (it follows the stream).
function itemsOf(sessionId) {
  const c = store.chats.get(sessionId);
  const f = fetched.get(sessionId);
  const messages = new Map(f ? f.messages : []);
  const tasks = new Map(f ? f.tasks : []);
  if (c) {
    for (const [id, m] of c.messages) messages.set(id, m);
    for (const [id, t] of c.tasks) tasks.set(id, t);
  }
  return { messages: [...messages.values()], tasks: [...tasks.values()] };
}

// { waiting: [approval or capability entries], replies: [one per chat], failed: [...] }, newest first.
export function inboxEntries() {
  readOpenChat();
  const waiting = [];
  for (const a of store.approvals.values()) {
    if (a.status === 'pending' && store.sessions.has(a.session_id)) waiting.push({ kind: 'approval', key: `a:${a.approval_id}`, session_id: a.session_id, at: a.ts || a.created_at || a.seen_at || 0, value: a });
  }
  for (const r of capabilityRequests.values()) {
    if (r.status === 'pending' && (!r.expires_at || r.expires_at > Date.now())) waiting.push({ kind: 'capability', key: `c:${r.request_id}`, session_id: r.session_id, at: r.ts || 0, value: r });
  }
  const replies = [];
  const failed = [];
  // Until the first snapshot has set where this device's inbox starts, nothing counts as unread.
  const m = loadMarks();
  const sessions = m && m.since !== null ? store.sessions.values() : [];
  for (const s of sessions) {
    const mark = markOf(s.id);
    const { messages, tasks } = itemsOf(s.id);
    const unread = [];
    for (const m of messages) {
      if (m.role !== 'agent' || m.state !== 'final' || messageAt(m) <= mark || isHiddenMessage(m)) continue;
      if (FAILED_ENDS.has(m.finish_reason)) failed.push({ kind: 'failed-turn', key: `m:${m.message_id}`, session_id: s.id, at: messageAt(m), value: m });
      else if (m.finish_reason !== 'cancelled' && m.finish_reason !== 'tool_call') unread.push(m);
    }
    for (const t of tasks) {
      if (t.status === 'failed' && taskAt(t) > mark) failed.push({ kind: 'failed-task', key: `t:${t.task_id}`, session_id: s.id, at: taskAt(t), value: t });
    }
    if (unread.length) {
      unread.sort((a, b) => messageAt(a) - messageAt(b));
      // One entry per chat: the latest reply's words, opening at the first one not read.
      const latest = unread[unread.length - 1];
      replies.push({ kind: 'reply', key: `m:${unread[0].message_id}`, session_id: s.id, at: messageAt(latest), value: latest, count: unread.length });
    }
  }
  const newest = (a, b) => b.at - a.at;
  return { waiting: waiting.sort(newest), replies: replies.sort(newest), failed: failed.sort(newest) };
}

export function inboxCount() {
  const { waiting, replies, failed } = inboxEntries();
  return { waiting: waiting.length, replies: replies.length, failed: failed.length, total: waiting.length + replies.length + failed.length };
}

export function entryHref(entry) {
  return `#/s/${encodeURIComponent(entry.session_id)}?at=${encodeURIComponent(entry.key)}`;
}

// Any change that may move a count: redraw soon, at most every REDRAW_MS (a streaming reply's
// deltas are events of its chat too, and move no count).
const REDRAW_MS = 150;

function onChange(fn) {
  let frame = 0;
  const soon = () => {
    if (!frame) frame = setTimeout(() => { frame = 0; fn(); }, REDRAW_MS);
  };
  const offs = [on('approvals', soon), on('capabilities', soon), on('sessions', soon), on('inbox', soon),
    on('*', (topic) => { if (topic.startsWith('messages:')) soon(); })];
  window.addEventListener('hashchange', soon);
  document.addEventListener('visibilitychange', soon);
  return () => {
    for (const off of offs) off();
    if (frame) clearTimeout(frame);
    window.removeEventListener('hashchange', soon);
    document.removeEventListener('visibilitychange', soon);
  };
}

// The tab's count: everything in the inbox; a screen reader hears what it is made of.
export function inboxBadge(badge) {
  const draw = () => {
    const n = inboxCount();
    clear(badge);
    if (n.total) {
      const parts = [[n.waiting, 'waiting for you'], [n.replies, n.replies === 1 ? 'reply' : 'replies'], [n.failed, 'failed']]
        .filter(([count]) => count).map(([count, what]) => `${count} ${what}`);
      badge.append(String(n.total), h('span', { class: 'sr-only', text: ` in the inbox: ${parts.join(', ')}` }));
    }
    badge.hidden = n.total === 0;
    badge.dataset.count = String(n.total);
  };
  draw();
  return onChange(draw);
}

// ---- the screen ----

function where(sessionId) {
  const s = store.sessions.get(sessionId);
  const inst = s && store.installations.get(s.installation_id);
  return { s, inst, title: sessionLabel(s), machine: installationName(inst) };
}

const CAPABILITY_TITLES = { location: 'Asks for your location', camera: 'Asks for a photo' };

// One line of the list: the chat, what happened, the machine and when; a link to the item.
function entryLine(entry) {
  const { s, inst, title, machine } = where(entry.session_id);
  let what;
  let tone = '';
  const v = entry.value;
  if (entry.kind === 'reply') {
    what = v.locked ? 'An encrypted reply: this device has no key for it yet' : previewText(v) || 'An empty reply';
    if (entry.count > 1) what = `${entry.count} replies · ${what}`;
  } else if (entry.kind === 'failed-turn') {
    const text = v.locked ? '' : previewText(v);
    what = `${v.finish_reason === 'incomplete' ? 'The reply stopped unfinished' : 'The agent failed'}${text ? `: ${text}` : ''}`;
    tone = ' inbox-failed';
  } else if (entry.kind === 'failed-task') {
    const error = v.locked ? '' : errorText(v.error);
    what = `Tool call failed: ${v.name || v.kind || 'a tool'}${error ? `: ${error}` : ''}`;
    tone = ' inbox-failed';
  } else {
    what = `${CAPABILITY_TITLES[v.capability] || 'A device request'}: ${v.reason || ''}`;
  }
  if (what.length > 160) what = `${what.slice(0, 159)}…`;
  return h('a', { class: `session-link inbox-link${tone}`, href: entryHref(entry), dataset: { kind: entry.kind } },
    h('span', { class: 'avatar', 'aria-hidden': 'true' }, inst && inst.custom_emoji ? inst.custom_emoji : icon('chats')),
    h('span', { class: 'session-text' },
      h('span', { class: 'session-title' }, s && s.encrypted ? h('span', { class: 'lock', title: 'End-to-end encrypted', 'aria-label': 'Encrypted:' }, icon('lock')) : null, title),
      h('span', { class: 'session-preview inbox-what', text: what }),
      h('span', { class: 'session-sub', text: `${machine} · ${formatTime(entry.at)}` })));
}

function lineItem() {
  return h('li', { class: 'session-item inbox-entry' });
}

function updateLine(el, entry) {
  const { title, machine } = where(entry.session_id);
  const v = entry.value;
  const signature = JSON.stringify([entry.key, entry.at, entry.count, title, machine, v.text, v.locked, v.status, v.reason]);
  if (el.dataset.signature === signature) return;
  el.dataset.signature = signature;
  clear(el);
  el.append(entryLine(entry));
}

// An approval's card, answerable here, with where it comes from and a link to it in its chat.
function approvalItem(entry) {
  return approvalCard.create(entry.value);
}

function updateApproval(el, entry) {
  const a = store.approvals.get(entry.value.approval_id) || entry.value;
  approvalCard.update(el, a);
  if (!el.querySelector('.approval-session')) {
    const { title, machine } = where(a.session_id);
    // The machine first, since the inbox mixes them; the chat's link last, as in the chat the answers are.
    el.prepend(h('p', { class: 'approval-where' }, icon('machines'), h('span', { text: machine })));
    el.append(h('a', { class: 'approval-session', href: entryHref({ ...entry, session_id: a.session_id }), text: `Open chat: ${title}` }));
  }
}

export function inboxView(main) {
  const head = h('div', { class: 'list-head' }, h('h1', { text: 'Inbox' }));
  const readAll = h('button', { type: 'button', class: 'btn btn-small btn-quiet', text: 'Mark all as read', hidden: true, onclick: () => markAllRead() });
  head.append(readAll);
  const section = (id, label) => {
    const title = h('h2', { id, class: 'section-title' });
    return { title, label, el: title };
  };
  const waitingTitle = section('inbox-waiting', 'Waiting for you');
  const approvals = h('section', { class: 'approvals-list', 'aria-labelledby': 'inbox-waiting' });
  const requests = h('ul', { class: 'sessions inbox-list', 'aria-label': 'Device requests' });
  const repliesTitle = section('inbox-replies', 'Finished while you were away');
  const replies = h('ul', { class: 'sessions inbox-list', 'aria-labelledby': 'inbox-replies' });
  const failedTitle = section('inbox-failed', 'Failed');
  const failed = h('ul', { class: 'sessions inbox-list', 'aria-labelledby': 'inbox-failed' });
  const empty = h('p', { class: 'empty', text: 'Nothing is waiting for you. Approvals, replies that finish while you are elsewhere, and failures show here.' });
  const doneTitle = h('h2', { class: 'section-title', text: 'Answered here' });
  const done = h('section', { class: 'approvals-list', 'aria-label': 'Answered here' });
  main.append(h('div', { class: 'screen inbox' }, head, empty,
    waitingTitle.el, approvals, requests, repliesTitle.el, replies, failedTitle.el, failed, doneTitle, done));

  function titled(t, count) {
    t.title.textContent = `${t.label} (${count})`;
    t.title.hidden = count === 0;
  }

  function draw() {
    const { waiting, replies: r, failed: f } = inboxEntries();
    const cards = waiting.filter((e) => e.kind === 'approval');
    reconcile(approvals, cards, (e) => e.key, approvalItem, updateApproval);
    reconcile(requests, waiting.filter((e) => e.kind === 'capability'), (e) => e.key, lineItem, updateLine);
    reconcile(replies, r, (e) => e.key, lineItem, updateLine);
    reconcile(failed, f, (e) => e.key, lineItem, updateLine);
    titled(waitingTitle, waiting.length);
    titled(repliesTitle, r.length);
    titled(failedTitle, f.length);
    empty.hidden = waiting.length + r.length + f.length > 0;
    readAll.hidden = r.length + f.length === 0;
    // The approvals answered on this device lately, as the Approvals screen had them.
    const answered = [...store.approvals.values()].filter((a) => a.status !== 'pending' && !a.fromTimeline)
      .sort((a, b) => (b.ts || b.seen_at || 0) - (a.ts || a.seen_at || 0)).slice(0, 20)
      .map((a) => ({ kind: 'approval', key: `a:${a.approval_id}`, session_id: a.session_id, value: a }));
    reconcile(done, answered, (e) => e.key, approvalItem, updateApproval);
    doneTitle.hidden = answered.length === 0;
  }
  const off = onChange(draw);
  const ticker = setInterval(() => {
    for (const el of approvals.querySelectorAll('.approval-pending')) approvalCard.tick(el);
  }, 1000);
  draw();
  return () => {
    off();
    clearInterval(ticker);
  };
}
