// How the app reads a chat's history (web/app/state.js) against a stand-in of
// relayd's routes: the timeline when relayd serves it, the messages alone when
// it answers 404 not_found (a relayd from before the timeline), and how live
// events and pages merge. No browser: fetch is replaced, nothing else is needed.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { useCredentials } from '../../../web/app/api.js';
import { store, chat, loadHistory, applyEvent } from '../../../web/app/state.js';

useCredentials({ token: async () => 'tok', refresh: async () => false, expired: () => {} });
console.warn = () => {};

const envelope = (status, body) => ({
  ok: status < 400,
  status,
  headers: { get: () => null },
  json: async () => (status < 400 ? { ok: true, result: body } : { ok: false, error: body }),
});

let routes;
let asked;
globalThis.fetch = async (path) => {
  asked.push(path);
  for (const [pattern, answer] of routes) if (pattern.test(path)) return answer(path);
  return envelope(404, { code: 'not_found', message: 'no such route' });
};

beforeEach(() => {
  store.chats.clear();
  store.approvals.clear();
  store.timeline = null;
  store.skew = null;
  asked = [];
});

const message = (id, at, extra = {}) => ({ message_id: id, session_id: 's1', interaction_id: 'i1', role: 'agent', text: id, state: 'final', created_at: at, ...extra });

test('an older relayd: the timeline route is 404 not_found, so the messages are read, and the app does not ask again', async () => {
  routes = [[/\/messages\?/, () => envelope(200, { messages: [message('m2', 20), message('m1', 10)], has_more: false, next_cursor: null })]];
  await loadHistory('s1');
  assert.equal(store.timeline, false);
  assert.deepEqual(chat('s1').order, ['m1', 'm2']);
  assert.match(asked[0], /\/v1\/me\/sessions\/s1\/timeline\?limit=50$/);
  assert.match(asked[1], /\/v1\/me\/sessions\/s1\/messages\?limit=50$/);
  asked = [];
  await loadHistory('s1');
  assert.equal(asked.length, 1);
  assert.match(asked[0], /\/messages\?/);
});

test('a session that does not exist is an error, not a reason to fall back', async () => {
  routes = [[/\/timeline\?/, () => envelope(404, { code: 'session_not_found', message: 'gone' })]];
  await assert.rejects(loadHistory('s1'), (err) => err.code === 'session_not_found');
  assert.equal(store.timeline, null);
});

test('the timeline: messages, tasks and approvals with their decisions; older pages by cursor; live events merge without doubles', async () => {
  const page1 = {
    items: [
      { type: 'message', at: 40, cursor: 'c4', message: message('m2', 40) },
      { type: 'approval', at: 30, cursor: 'c3', approval: { approval_id: 'a1', session_id: 's1', state: 'resolved', decision: 'deny', created_at: 30, content: null } },
      { type: 'task', at: 20, cursor: 'c2', task: { task_id: 't1', session_id: 's1', kind: 'edit', status: 'completed', result: { content: [] }, created_at: 20, partial_result: null, error: null } },
    ],
    has_more: true,
    next_cursor: 'c2',
  };
  const page2 = { items: [{ type: 'message', at: 10, cursor: 'c1', message: message('m1', 10, { role: 'user' }) }], has_more: false, next_cursor: null };
  routes = [[/\/timeline\?limit=50&before=c2$/, () => envelope(200, page2)], [/\/timeline\?limit=50$/, () => envelope(200, page1)]];
  await loadHistory('s1');
  const c = chat('s1');
  assert.equal(store.timeline, true);
  assert.deepEqual(c.order, ['m2']);
  assert.equal(c.tasks.get('t1').status, 'completed');
  assert.equal(store.approvals.get('a1').status, 'resolved');
  assert.equal(store.approvals.get('a1').decision, 'deny');
  assert.equal(c.hasMore, true);
  await loadHistory('s1', true);
  assert.deepEqual(c.order, ['m1', 'm2']);
  assert.equal(c.hasMore, false);
  // A poll of the first page later does not forget how far back the reader went.
  await loadHistory('s1');
  assert.equal(c.hasMore, false);
  // A replayed progress of the finished task does not reopen it; a replayed approval request does not reopen it either.
  applyEvent('task_progress', { task_id: 't1', session_id: 's1', interaction_id: 'i1', kind: 'edit', status_label: 'x', partial_result: { content: [] } });
  assert.equal(c.tasks.get('t1').status, 'completed');
  applyEvent('approval_requested', { approval_id: 'a1', session_id: 's1', ts: 30, title: 'Edit' });
  assert.equal(store.approvals.get('a1').status, 'resolved');
  assert.equal(c.tasks.size, 1);
});

test('live: a task seen before a message the relay dated earlier is placed before that message', async () => {
  routes = [];
  store.skew = 1000; // our estimate of the relay's clock runs a second ahead of the relay's
  const now = Date.now();
  applyEvent('message_added', message('m1', now, { role: 'user' }));
  applyEvent('task_created', { task_id: 't1', session_id: 's1', interaction_id: 'i1', kind: 'edit', status_label: 'Edit' });
  applyEvent('message_added', message('m2', now + 5));
  const c = chat('s1');
  const t = c.tasks.get('t1');
  assert.ok(t.seen_at > c.messages.get('m1').created_at, 'after the message before it');
  assert.ok(t.seen_at < c.messages.get('m2').created_at, 'before the message after it');
});

test('two messages of one millisecond keep the relay\'s order (a reply written 0 ms after its prompt)', async () => {
  const prompt = message('msg_zzz', 50, { role: 'user' });
  const reply = message('msg_aaa', 50);
  routes = [[/\/timeline\?/, () => envelope(200, { items: [
    { type: 'message', at: 50, cursor: 'c2', message: reply },
    { type: 'message', at: 50, cursor: 'c1', message: prompt },
  ], has_more: false, next_cursor: null })]];
  await loadHistory('s1');
  assert.deepEqual(chat('s1').order, ['msg_zzz', 'msg_aaa']);
  // Live, the stream's order.
  applyEvent('message_added', message('msg_yyy', 60, { role: 'user' }));
  applyEvent('message_added', message('msg_bbb', 60));
  assert.deepEqual(chat('s1').order.slice(2), ['msg_yyy', 'msg_bbb']);
});
