// web/app/sealed.js: the records of an encrypted session opened into the
// plaintext fields the app reads, sealed the way a bridge seals them (Node's
// own HKDF and AES-GCM here, not crypto.js), locked and readable without a
// key, and unchanged when plain.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, hkdfSync, randomBytes, webcrypto } from 'node:crypto';

if (!globalThis.crypto) globalThis.crypto = webcrypto;
const s = await import('../../../web/app/sealed.js');
const c = await import('../../../web/app/crypto.js');

const KEY = new Uint8Array(randomBytes(32));
const OLD = new Uint8Array(randomBytes(32));
const SID = 'ses_e2e';

// What a bridge sends: HKDF(session key, "sophon/v1/blob/" + path), AES-256-GCM, 0x01 ‖ nonce ‖ ct ‖ tag.
function bridgeSeal(key, path, text) {
  const blob = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), Buffer.from(`sophon/v1/blob/${path}`), 32));
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', blob, nonce);
  const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([1]), nonce, body, cipher.getAuthTag()]).toString('base64');
}

test('a message: text_ct, then a list of delta envelopes, opened in order', async () => {
  const m = { message_id: 'm1', session_id: SID, role: 'agent', state: 'streaming', text_ct: bridgeSeal(KEY, `messages/${SID}`, 'Hel'),
    deltas_ct: [bridgeSeal(KEY, `messages/${SID}`, 'lo, '), bridgeSeal(KEY, `messages/${SID}`, 'wörld')] };
  const open = await s.openMessage([KEY], SID, m);
  assert.equal(open.text, 'Hello, wörld');
  assert.equal(open.encrypted, true);
  assert.equal(open.locked, false);
  assert.equal(open.message_id, 'm1');
});

test('without the key, or with a wrong one: locked, a readable placeholder, no throw', async () => {
  const m = { message_id: 'm1', session_id: SID, text_ct: bridgeSeal(KEY, `messages/${SID}`, 'secret words') };
  for (const keys of [[], [OLD], undefined]) {
    const open = await s.openMessage(keys, SID, m);
    assert.equal(open.text, s.LOCKED_TEXT);
    assert.equal(open.locked, true);
    assert.ok(!JSON.stringify(open).includes('secret words'));
  }
  // Not an envelope at all (a relay serving garbage): locked too.
  assert.equal((await s.openMessage([KEY], SID, { ...m, text_ct: 'AgAAAA==' })).locked, true);
  assert.equal((await s.openMessage([KEY], SID, { ...m, text_ct: '%%%' })).locked, true);
  // A message of another session's path does not open under this one's.
  assert.equal((await s.openMessage([KEY], 'ses_other', m)).locked, true);
});

test('a rotated session: old messages open with the old key, new ones with the new', async () => {
  const before = { message_id: 'a', session_id: SID, text_ct: bridgeSeal(OLD, `messages/${SID}`, 'before') };
  const after = { message_id: 'b', session_id: SID, text_ct: bridgeSeal(KEY, `messages/${SID}`, 'after') };
  assert.equal((await s.openMessage([KEY, OLD], SID, before)).text, 'before');
  assert.equal((await s.openMessage([KEY, OLD], SID, after)).text, 'after');
});

test('a plain record goes through unchanged', async () => {
  const m = { message_id: 'p', session_id: 'ses_plain', text: 'hi' };
  assert.equal(await s.openMessage([], 'ses_plain', m), m);
  const t = { task_id: 't', session_id: 'ses_plain', status_label: 'Reading' };
  assert.equal(await s.openTask([], 'ses_plain', t), t);
  const a = { approval_id: 'a', session_id: 'ses_plain', title: 'Run ls' };
  assert.equal(await s.openApproval([], 'ses_plain', a), a);
  assert.equal(await s.openEvent([], 'message_delta', { session_id: 'x', delta: 'd' }).then((d) => d.delta), 'd');
});

test('a task: label as text, args and results as JSON, under tasks/<sid>', async () => {
  const path = `tasks/${SID}`;
  const t = { task_id: 't1', session_id: SID, status_label_ct: bridgeSeal(KEY, path, 'Reading a file'),
    args_ct: bridgeSeal(KEY, path, JSON.stringify({ path: '/etc/hosts' })),
    result_ct: bridgeSeal(KEY, path, JSON.stringify({ content: [{ type: 'text', text: 'ok' }] })),
    error_ct: bridgeSeal(KEY, path, 'plain words, not JSON') };
  const open = await s.openTask([KEY], SID, t);
  assert.equal(open.status_label, 'Reading a file');
  assert.deepEqual(open.args, { path: '/etc/hosts' });
  assert.deepEqual(open.result, { content: [{ type: 'text', text: 'ok' }] });
  assert.equal(open.error, 'plain words, not JSON');
  // An error string that happens to read as JSON stays the string a plain chat shows; an object is JSON.
  for (const text of ['404', 'null', 'true', '"quoted"'])
    assert.equal((await s.openTask([KEY], SID, { ...t, error_ct: bridgeSeal(KEY, path, text) })).error, text, text);
  assert.deepEqual((await s.openTask([KEY], SID, { ...t, error_ct: bridgeSeal(KEY, path, '{"message":"boom"}') })).error, { message: 'boom' });
  const locked = await s.openTask([], SID, t);
  assert.equal(locked.locked, true);
  assert.equal(locked.status_label, s.LOCKED_TEXT);
  assert.equal(locked.args, undefined);
});

test('an approval: details_ct is JSON {title, message, command, host, tool_call_id, approval_slug, content}', async () => {
  const content = [{ type: 'diff', path: '/srv/a.txt', old_text: 'one\n', new_text: 'two\n' }];
  const details = { title: 'Run a command', message: 'The agent wants to list files', command: 'ls -la', host: 'laptop', tool_call_id: 'tc_1', approval_slug: 'exec' };
  // The plain metadata stays the relay's: a sealed action or severity does not replace it.
  const a = { approval_id: 'apr_1', session_id: SID, action: 'exec', severity: 'high',
    details_ct: bridgeSeal(KEY, `approvals/${SID}`, JSON.stringify({ ...details, content, action: 'read', severity: 'low' })) };
  const open = await s.openApproval([KEY], SID, a);
  for (const [k, v] of Object.entries(details)) assert.equal(open[k], v, k);
  assert.deepEqual(open.content, content, 'the blocks a person reviews (an edit\'s diff) come out of details_ct');
  assert.equal(open.action, 'exec');
  assert.equal(open.severity, 'high');
  const locked = await s.openApproval([], SID, a);
  assert.equal(locked.title, s.LOCKED_TEXT);
  assert.equal(locked.command, undefined);
});

test('stream events and timeline items', async () => {
  const d = await s.openEvent([KEY], 'message_delta', { session_id: SID, message_id: 'm', delta_ct: bridgeSeal(KEY, `messages/${SID}`, 'chunk') });
  assert.equal(d.delta, 'chunk');
  const lockedDelta = await s.openEvent([], 'message_delta', { session_id: SID, message_id: 'm', delta_ct: bridgeSeal(KEY, `messages/${SID}`, 'chunk') });
  assert.equal(lockedDelta.locked, true);
  assert.equal(lockedDelta.delta, '');
  const created = await s.openEvent([KEY], 'session_created', { session: { id: SID, encrypted: true, title_ct: bridgeSeal(KEY, `session_meta/${SID}`, 'My chat') } });
  assert.equal(created.session.title, 'My chat');
  assert.equal(s.eventSession('session_created', created), SID);
  const item = await s.openTimelineItem([KEY], SID, { type: 'task', at: 1, task: { task_id: 't', args_ct: bridgeSeal(KEY, `tasks/${SID}`, '[1,2]') } });
  assert.deepEqual(item.task.args, [1, 2]);
  const msg = await s.openTimelineItem([KEY], SID, { type: 'message', message: { message_id: 'm', text_ct: bridgeSeal(KEY, `messages/${SID}`, 'from the page') } });
  assert.equal(msg.message.text, 'from the page');
});

test('what the client sends: text_ct and title_ct a bridge opens', async () => {
  const body = await s.sealSend(KEY, SID, { text: 'please run the tests', idempotency_key: 'k1' });
  assert.equal(body.text, undefined);
  assert.equal(body.idempotency_key, 'k1');
  assert.equal(await c.openText([KEY], `messages/${SID}`, body.text_ct), 'please run the tests');
  assert.equal(await c.openText([KEY], `session_meta/${SID}`, await s.sealTitle(KEY, SID, 'Title')), 'Title');
  assert.equal(await s.sealTitle(KEY, SID, null), null);
});

test('a capability request: reason from reason_ct under capabilities/<sid>; locked without the key; plain unchanged', async () => {
  const r = { request_id: 'dcr_1', session_id: SID, capability: 'location', reason: null, reason_ct: bridgeSeal(KEY, `capabilities/${SID}`, 'to find cafés') };
  const open = await s.openCapabilityRequest([KEY], SID, r);
  assert.equal(open.reason, 'to find cafés');
  assert.equal(open.encrypted, true);
  const evented = await s.openEvent([KEY], 'device_capability_request', r);
  assert.equal(evented.reason, 'to find cafés');
  const locked = await s.openCapabilityRequest([OLD], SID, r);
  assert.equal(locked.reason, s.LOCKED_TEXT);
  assert.equal(locked.locked, true);
  const plain = { request_id: 'dcr_2', session_id: SID, reason: 'plain' };
  assert.equal(await s.openCapabilityRequest([KEY], SID, plain), plain);
});

test('an answer is sealed under capabilities/<sid>, a bridge opens it', async () => {
  const sealed = await s.sealAnswer(KEY, SID, { location: { latitude: 1.5, longitude: 2, accuracy: 3 } });
  assert.equal(await c.openText([KEY], `capabilities/${SID}`, sealed), '{"location":{"latitude":1.5,"longitude":2,"accuracy":3}}');
});

test('a file: sealed bytes and meta_ct under attachments/<sid>; the entry opens to its real name; bytes that are not the named ones do not open', async () => {
  const bytes = new TextEncoder().encode('the survey');
  const { envelope, meta } = await s.sealFile(KEY, SID, bytes, 'survey.txt', 'text/plain');
  assert.equal(envelope[0], 1);
  assert.deepEqual({ name: meta.name, mime: meta.mime, size: meta.size }, { name: 'survey.txt', mime: 'text/plain', size: 10 });
  assert.deepEqual(await s.openFile([OLD, KEY], SID, envelope, meta), bytes);
  const other = await s.sealFile(KEY, SID, new TextEncoder().encode('other'), 'x', 'text/plain');
  assert.equal(await s.openFile([KEY], SID, other.envelope, meta), null, 'the sha256 of meta binds the bytes');
  const m = { message_id: 'm9', session_id: SID, text_ct: bridgeSeal(KEY, `messages/${SID}`, 'see'),
    attachments: [{ key: 'att_1', mime: 'application/octet-stream', name: null, size: 38, meta_ct: await s.sealMeta(KEY, SID, meta) }] };
  const open = await s.openMessage([KEY], SID, m);
  assert.equal(open.attachments[0].name, 'survey.txt');
  assert.equal(open.attachments[0].mime, 'text/plain');
  assert.equal(open.attachments[0].sealed, true);
  assert.equal(open.attachments[0].session_id, SID);
  const locked = await s.openMessage([OLD], SID, m);
  assert.equal(locked.attachments[0].locked, true);
});
