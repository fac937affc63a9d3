// The outbox's pure state logic (web/app/outbox.js): pending -> sending -> sent,
// back to pending when the relay was not reached, failed when it refused;
// and what a reload leaves. (Sending an entry again is safe: its id is the
// send's idempotency key.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newEntry, nextPending, markSending, markSent, markFailed, markRetry, remove, restore, statusText, retryable,
  MAX_ATTEMPTS } from '../../../web/app/outbox.js';

const entry = (id, text = id, extra = {}) => ({ ...newEntry({ id, sessionId: 'ses_1', text, now: 1000 }), ...extra });

test('a new entry is pending; the oldest pending one goes first', () => {
  const list = [entry('a', 'a', { state: 'failed' }), entry('b'), entry('c')];
  assert.equal(list[1].state, 'pending');
  assert.equal(nextPending(list).id, 'b');
  assert.equal(nextPending([]), null);
});

test('sending, then sent: out of the outbox', () => {
  let list = markSending([entry('a'), entry('b')], 'a', 5000);
  assert.equal(list[0].state, 'sending');
  assert.equal(list[0].attempts, 1);
  assert.equal(list[0].tried_at, 5000);
  assert.equal(nextPending(list).id, 'b');
  list = markSent(list, 'a');
  assert.deepEqual(list.map((e) => e.id), ['b']);
});

test('no answer: pending again', () => {
  let list = markSending([entry('a')], 'a', 5000);
  list = markFailed(list, 'a', { status: 0 });
  assert.equal(list[0].state, 'pending');
  assert.equal(list[0].id, 'a', 'the same id, so the same idempotency key, for the next attempt');
  // The network never makes it fail for good.
  for (let i = 0; i < 2 * MAX_ATTEMPTS; i++) list = markFailed(markSending(list, 'a', 10000 + i), 'a', { status: 0 });
  assert.equal(list[0].state, 'pending');
});

test('a refusal fails it with the reason; Retry makes it pending again', () => {
  let list = markFailed(markSending([entry('a')], 'a', 5000), 'a', { status: 400, message: 'text is too long' });
  assert.equal(list[0].state, 'failed');
  assert.equal(list[0].error, 'text is too long');
  assert.equal(nextPending(list), null);
  list = markRetry(list, 'a');
  assert.equal(list[0].state, 'pending');
  assert.equal(list[0].attempts, 0);
  assert.equal(list[0].error, null);
  assert.deepEqual(remove(list, 'a'), []);
});

test('server errors are retried, then fail after MAX_ATTEMPTS', () => {
  let list = [entry('a')];
  for (let i = 1; i < MAX_ATTEMPTS; i++) {
    list = markFailed(markSending(list, 'a', 1000 * i), 'a', { status: 500, message: 'oops' });
    assert.equal(list[0].state, 'pending', `attempt ${i}`);
  }
  list = markFailed(markSending(list, 'a', 9999), 'a', { status: 503, message: 'busy' });
  assert.equal(list[0].state, 'failed');
  assert.equal(retryable(0), true);
  assert.equal(retryable(429), true);
  assert.equal(retryable(404), false);
});

test('a reload: an entry that was being sent is pending again; junk is dropped', () => {
  const stored = [{ ...entry('a'), state: 'sending', tried_at: 7000 }, entry('b'), { id: 3 }, null, { id: 'x', session_id: 's' }];
  const list = restore(JSON.parse(JSON.stringify(stored)));
  assert.deepEqual(list.map((e) => [e.id, e.state]), [['a', 'pending'], ['b', 'pending']]);
  assert.deepEqual(restore('nonsense'), []);
});

test('what the chat says under an entry', () => {
  assert.equal(statusText(entry('a'), false), 'Waiting for the relay to send it');
  assert.equal(statusText(entry('a'), true), 'Waiting to send…');
  assert.equal(statusText({ ...entry('a'), state: 'sending' }, true), 'Sending…');
  assert.equal(statusText({ ...entry('a'), state: 'failed', error: 'No.' }, true), 'Not sent: No.');
});
