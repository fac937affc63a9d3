// A turn's tokens, the context meter's figures (web/app/usage.js) and which user messages are queued
// behind an earlier turn (web/app/queued.js), under Node's test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatTokens, turnTokens, contextOf, latestContext } from '../../../web/app/usage.js';
import { queuedTurns } from '../../../web/app/queued.js';
import { terminalOf } from '../../../web/app/shell.js';

test('token counts are short', () => {
  assert.deepEqual([0, 950, 1000, 1234, 9999, 42000, 199500, 1200000, 2000000].map(formatTokens),
    ['0', '950', '1 k', '1.2 k', '10 k', '42 k', '200 k', '1.2 M', '2 M']);
});

test('the tokens a turn used, and nothing when it reports none', () => {
  assert.equal(turnTokens({ input_tokens: 120, output_tokens: 30, cached_tokens: 1000 }), '120 in · 30 out tokens');
  assert.equal(turnTokens({ input_tokens: 42000 }), '42 k in tokens');
  assert.equal(turnTokens({ total_tokens: 1500 }), '1.5 k tokens');
  for (const none of [null, undefined, {}, { input_tokens: -1 }, { input_tokens: '5' }, { model: 'x' }, 'usage'])
    assert.equal(turnTokens(none), '');
});

test('context figures hold only when both are counts and the size is not 0', () => {
  assert.deepEqual(contextOf({ context_used: 42000, context_size: 200000, cost: { amount: 0.25, currency: 'USD' } }),
    { used: 42000, size: 200000, cost: { amount: 0.25, currency: 'USD' } });
  assert.deepEqual(contextOf({ context_used: 5, context_size: 10, cost: { amount: 1, currency: 'dollars' } }), { used: 5, size: 10, cost: null });
  for (const none of [null, {}, { context_used: 5 }, { context_used: 5, context_size: 0 }, { context_used: -1, context_size: 10 }, { context_used: 1.5, context_size: 10 }])
    assert.equal(contextOf(none), null);
});

test('the meter reads the latest agent message that reports the context', () => {
  const messages = [
    { role: 'agent', created_at: '2026-11-29T01:00:00.000Z', usage: { context_used: 1000, context_size: 200000 } },
    { role: 'agent', created_at: '2026-11-29T03:00:00.000Z', usage: { input_tokens: 3 } },
    { role: 'agent', created_at: '2026-11-29T02:00:00.000Z', usage: { context_used: 42000, context_size: 200000 } },
    { role: 'user', created_at: '2026-11-29T04:00:00.000Z', usage: { context_used: 1, context_size: 2 } },
  ];
  assert.deepEqual(latestContext(messages), { used: 42000, size: 200000, cost: null });
  assert.equal(latestContext([]), null);
});

const user = (id, interaction, at) => ({ message_id: id, role: 'user', interaction_id: interaction, created_at: Number(at), state: 'final', text: id });
const agent = (id, interaction, at, state, text = ' ', finish = null) =>
  ({ message_id: id, role: 'agent', interaction_id: interaction, created_at: Number(at), state, text, finish_reason: finish });

test('a message sent while an earlier turn runs is queued until that turn ends', () => {
  const running = [
    user('u1', 'i1', '01'), agent('a1', 'i1', '02', 'streaming', 'working on it'),
    user('u2', 'i2', '03'), agent('a2', 'i2', '04', 'streaming'),
    user('u3', 'i3', '05'),
  ];
  assert.deepEqual([...queuedTurns(running)].sort(), ['i2', 'i3']);
  // the first turn ended: the second runs, the third still waits
  const next = [
    user('u1', 'i1', '01'), agent('a1', 'i1', '02', 'final', 'done', 'stop'),
    user('u2', 'i2', '03'), agent('a2', 'i2', '04', 'streaming'),
    user('u3', 'i3', '05'), agent('a3', 'i3', '06', 'streaming'),
  ];
  assert.deepEqual([...queuedTurns(next)], ['i3']);
  // a turn that paused for a tool call is still open; a cancelled one is not
  const paused = [user('u1', 'i1', '01'), agent('a1', 'i1', '02', 'final', 'let me look', 'tool_call'), agent('a1b', 'i1', '03', 'streaming'),
    user('u2', 'i2', '04')];
  assert.deepEqual([...queuedTurns(paused)], ['i2']);
  const cancelled = [user('u1', 'i1', '01'), agent('a1', 'i1', '02', 'final', '.', 'cancelled'),
    user('u2', 'i2', '03'), agent('a2', 'i2', '04', 'final', ' ', 'cancelled')];
  assert.deepEqual([...queuedTurns(cancelled)], []);
  // agents that answer side by side (a reply already has text): not queued
  const parallel = [user('u1', 'i1', '01'), agent('a1', 'i1', '02', 'streaming', 'one'),
    user('u2', 'i2', '03'), agent('a2', 'i2', '04', 'streaming', 'two')];
  assert.deepEqual([...queuedTurns(parallel)], []);
});

test('a task\'s terminal: the result\'s once it ended, else the latest partial result\'s', () => {
  assert.deepEqual(terminalOf({ partial_result: { terminal: { output: 'a\n' } } }), { output: 'a\n' });
  assert.deepEqual(terminalOf({ partial_result: { terminal: { output: 'a\n' } }, result: { terminal: { output: 'a\nb\n', exit_status: 0 } } }),
    { output: 'a\nb\n', exit_status: 0 });
  assert.equal(terminalOf({ partial_result: { content: [] } }), null);
  assert.equal(terminalOf({ partial_result: { terminal: { output: 5 } } }), null);
});
