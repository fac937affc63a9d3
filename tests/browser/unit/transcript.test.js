// How the web client merges a chat's pieces (web/app/transcript.js) and offers
// the agent's commands (web/app/commands.js), under Node's test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  mergeTask, mergeApproval, mergePageMessage, timelineEntry, orderItems, planEntries, thinkingText,
  contentBlocks, resultDetail, errorText, argsDetail, taskState, taskKind, TASK_KINDS, liveAt, pinBefore, endsTurn, unfence, ties, isHiddenMessage, isHeldBubble, settledMessages, agentLabel,
} from '../../../web/app/transcript.js';
import { commandQuery, filterCommands, commandIn } from '../../../web/app/commands.js';

const events = (list) => list.reduce((task, [status, fields]) => mergeTask(task, { ...fields, status }), null);

test('a task runs until its end, and a late progress never reopens it', () => {
  let t = mergeTask(null, { task_id: 't1', kind: 'edit', status_label: 'Edit a.txt', args: { path: 'a.txt' }, status: 'created' });
  assert.equal(taskState(t).state, 'running');
  t = mergeTask(t, { task_id: 't1', status: 'progressing', partial_result: { content: [{ type: 'text', text: 'half' }] }, status_label: null });
  assert.equal(t.status, 'progressing');
  assert.equal(t.status_label, 'Edit a.txt', 'a null field keeps the known value');
  t = mergeTask(t, { task_id: 't1', status: 'completed', result: { content: [] } });
  assert.equal(taskState(t).state, 'completed');
  const late = mergeTask(t, { task_id: 't1', status: 'progressing', partial_result: { content: [{ type: 'text', text: 'stale' }] }, status_label: 'stale' });
  assert.equal(late.status, 'completed');
  assert.equal(late.status_label, 'Edit a.txt');
  assert.deepEqual(late.partial_result, t.partial_result);
  // A second final (a replayed event, a timeline item) keeps the first.
  assert.equal(mergeTask(t, { task_id: 't1', status: 'failed' }).status, 'completed');
  // created after progressing does not go back.
  assert.equal(events([['progressing', {}], ['created', { kind: 'read' }]]).status, 'progressing');
});

test('a timeline item and the events merge in any order to the same task', () => {
  const item = { task_id: 't', kind: 'execute', name: 'ls', status_label: 'ls', status: 'completed', args: { command: 'ls' },
    result: { content: [{ type: 'text', text: 'a\nb' }] }, created_at: 1000 };
  const fromEvents = events([['created', { task_id: 't', kind: 'execute', args: { command: 'ls' }, seen_at: 1200 }],
    ['progressing', { task_id: 't', partial_result: { content: [] } }]]);
  const a = mergeTask(fromEvents, item);
  const b = mergeTask(mergeTask(null, item), { task_id: 't', status: 'progressing', partial_result: { content: [] } });
  for (const t of [a, b]) {
    assert.equal(t.status, 'completed');
    assert.equal(t.created_at, 1000);
    assert.deepEqual(contentBlocks(t), [{ type: 'text', text: 'a\nb' }]);
  }
});

test('approvals: a decision once known stays, a stale pending page does not reopen one', () => {
  let a = mergeApproval(null, { approval_id: 'apr_1', status: 'pending', title: 'Edit' });
  a = mergeApproval(a, { status: 'resolved', decision: 'deny' });
  assert.equal(a.status, 'resolved');
  const stale = mergeApproval(a, { status: 'pending', decision: null, content: [{ type: 'text', text: 'x' }] });
  assert.equal(stale.status, 'resolved');
  assert.equal(stale.decision, 'deny');
  assert.deepEqual(stale.content, [{ type: 'text', text: 'x' }]);
});

test('timeline items become the app\'s entries', () => {
  assert.deepEqual(timelineEntry({ type: 'approval', at: 1, approval: { approval_id: 'a', state: 'expired' } }),
    { type: 'approval', value: { approval_id: 'a', state: 'expired', status: 'expired' } });
  assert.equal(timelineEntry({ type: 'task', at: 1, task: { task_id: 't' } }).value.task_id, 't');
  assert.equal(timelineEntry({ type: 'message', message: { message_id: 'm' } }).type, 'message');
  assert.equal(timelineEntry({ type: 'future', future: {} }), null);
  assert.equal(timelineEntry(null), null);
});

test('page messages: a reply followed live keeps its deltas; a final one is never replaced by a streaming copy', () => {
  const live = { message_id: 'm', state: 'streaming', text: 'hello wor', fromHistory: false };
  assert.equal(mergePageMessage(live, { message_id: 'm', state: 'streaming', text: 'hello' }), null);
  assert.equal(mergePageMessage(live, { message_id: 'm', state: 'final', text: 'hello world' }).text, 'hello world');
  assert.equal(mergePageMessage({ ...live, state: 'final', text: 'x' }, { message_id: 'm', state: 'streaming', text: 'x' }), null);
  assert.equal(mergePageMessage(undefined, { message_id: 'm', state: 'streaming', text: 'a' }).fromHistory, true);
  assert.equal(mergePageMessage(undefined, { message_id: 'm', state: 'final', text: 'a' }).fromHistory, false);
});

test('a turn goes on after a message that ended for a tool call', () => {
  assert.equal(endsTurn({ role: 'agent', state: 'final', finish_reason: 'tool_call' }), false);
  assert.equal(endsTurn({ role: 'agent', state: 'final', finish_reason: 'stop' }), true);
  assert.equal(endsTurn({ role: 'agent', state: 'final', finish_reason: null }), true);
  assert.equal(endsTurn({ role: 'agent', state: 'streaming' }), false);
  assert.equal(endsTurn({ role: 'user', state: 'final' }), false);
  assert.equal(endsTurn(undefined), false);
});

test('a tool output fenced whole shows what is inside the fence', () => {
  assert.equal(unfence('```console\ndone\n```'), 'done');
  assert.equal(unfence('```\nUser refused permission to run tool\n```'), 'User refused permission to run tool');
  assert.equal(unfence('````md\na ```b``` c\n````\n'), 'a ```b``` c');
  assert.equal(unfence('```\na\n```\ntext after'), '```\na\n```\ntext after', 'not fenced whole');
  assert.equal(unfence('```\na\n```\n```\nb\n```'), '```\na\n```\n```\nb\n```', 'two fences');
  assert.equal(unfence('plain'), 'plain');
});

test('one millisecond, two messages: the relay\'s order, as pages and the stream show it', () => {
  const tie = ties();
  const first = tie.page(3); // a page of 3: its items get first, first - 1, first - 2 (newest first)
  const second = tie.page(2); // an older page: below all of the first
  assert.ok(second < first - 2);
  assert.ok(tie.page(1) < second - 1);
  const live = [tie.live(), tie.live()];
  assert.ok(live[1] > live[0] && live[0] > first);
  // A prompt and its reply in the same millisecond, read from a page (reply first, being newest).
  const items = [
    { type: 'message', at: 5, id: 'msg_Z', tie: first - 1 }, // the prompt (older)
    { type: 'message', at: 5, id: 'msg_A', tie: first }, // the reply
  ];
  assert.deepEqual(orderItems(items).map((i) => i.id), ['msg_Z', 'msg_A']);
});

test('order: by time, then message before task before approval, then id', () => {
  const items = [
    { type: 'approval', at: 5, id: 'a1' }, { type: 'message', at: 7, id: 'm2' }, { type: 'task', at: 5, id: 't1' },
    { type: 'message', at: 5, id: 'm1' }, { type: 'message', at: 1, id: 'm0' }, { type: 'task', at: 5, id: 't0' },
  ];
  assert.deepEqual(orderItems(items).map((i) => i.id), ['m0', 'm1', 't0', 't1', 'a1', 'm2']);
});

test('live dates: strictly after what arrived before; pinned before a message that arrives after', () => {
  assert.equal(liveAt(0, 100), 100);
  assert.ok(liveAt(100, 100) > 100);
  assert.ok(liveAt(100, 50) > 100, 'a clock behind never dates an item before the one before it');
  // A task and an approval seen at 105 and 106 (our clock ran ahead), then a message the relay dated 103.
  const task = { type: 'task', id: 't', seen_at: 105 };
  const approval = { type: 'approval', id: 'a', seen_at: 106 };
  const older = { type: 'task', id: 'o', seen_at: 90 };
  assert.equal(pinBefore([approval, task, older], 103), 2);
  assert.ok(task.seen_at < approval.seen_at && approval.seen_at < 103 && older.seen_at === 90);
  const order = orderItems([{ type: 'message', id: 'm', at: 103 }, ...[task, approval, older].map((v) => ({ ...v, at: v.seen_at }))]);
  assert.deepEqual(order.map((i) => i.id), ['o', 't', 'a', 'm']);
  // One left just below the message, one moved: the moved one stays after it.
  const first = { id: 'f', seen_at: 102.9995 };
  const second = { id: 's', seen_at: 103.5 };
  pinBefore([second, first], 103);
  assert.ok(first.seen_at === 102.9995 && second.seen_at > first.seen_at && second.seen_at < 103);
  // Nor does a moved one pass a dated item (a message at 100) that came before it.
  const late = { id: 'l', seen_at: 110 };
  const early = { id: 'e', seen_at: 50 };
  pinBefore([late, early], 103, 100);
  assert.ok(late.seen_at > 100 && late.seen_at < 103 && early.seen_at === 50);
});

test('plans: the latest list while running, the final one after; odd entries tamed', () => {
  const t = { status: 'progressing', partial_result: { entries: [
    { content: 'Read the code', priority: 'high', status: 'completed' },
    { content: 'Fix it', priority: 'medium', status: 'in_progress' },
    { content: 7, status: 'weird' }, null] } };
  assert.deepEqual(planEntries(t), [
    { content: 'Read the code', status: 'completed', priority: 'high' },
    { content: 'Fix it', status: 'in_progress', priority: 'medium' },
    { content: '', status: 'pending', priority: null }]);
  const done = { ...t, status: 'completed', result: { entries: [{ content: 'Fix it', status: 'completed', priority: 'low' }] } };
  assert.deepEqual(planEntries(done).map((e) => e.status), ['completed']);
  assert.deepEqual(planEntries({ status: 'created' }), []);
});

test('thinking text, content blocks, result and error details: nothing null shown', () => {
  assert.equal(thinkingText({ partial_result: { text: 'hmm' } }), 'hmm');
  assert.equal(thinkingText({ result: { text: 'done' }, partial_result: { text: 'hmm' } }), 'done');
  assert.equal(thinkingText({}), '');
  assert.deepEqual(contentBlocks({ partial_result: { content: [{ type: 'diff', path: '/a' }, null, { nope: 1 }] } }), [{ type: 'diff', path: '/a' }]);
  assert.deepEqual(contentBlocks({ result: null, partial_result: null }), []);
  assert.equal(resultDetail({ result: { content: [], locations: [] } }), null);
  assert.equal(resultDetail({ result: { content: [], raw_output: null } }), null);
  assert.deepEqual(resultDetail({ result: { content: [], raw_output: { code: 0 } } }), { code: 0 });
  assert.deepEqual(resultDetail({ result: { decision: 'approve' } }), { decision: 'approve' });
  assert.equal(resultDetail({ result: {} }), null);
  assert.equal(resultDetail({}), null);
  assert.equal(errorText({ message: 'boom' }), 'boom');
  assert.equal(errorText('boom'), 'boom');
  assert.equal(errorText(null), '');
  assert.equal(argsDetail({}), null);
  assert.equal(argsDetail(null), null);
  assert.deepEqual(argsDetail({ path: 'a' }), { path: 'a' });
});

test('every ACP tool kind has a label and an icon; an unknown kind is a tool', () => {
  for (const kind of ['read', 'edit', 'delete', 'move', 'search', 'execute', 'think', 'fetch', 'switch_mode', 'other', 'plan']) {
    assert.ok(TASK_KINDS[kind].label && TASK_KINDS[kind].icon, kind);
  }
  assert.equal(taskKind('teleport').label, 'Tool');
  assert.equal(taskKind(undefined).label, 'Tool');
});

test('commands: "/" at the start offers them, filtered as typed', () => {
  assert.equal(commandQuery('/'), '');
  assert.equal(commandQuery('/rev'), 'rev');
  assert.equal(commandQuery('/review now'), null);
  assert.equal(commandQuery('hello /x'), null);
  assert.equal(commandQuery(''), null);
  assert.equal(commandQuery('//'), null);
  const commands = [
    { name: 'review', description: 'Review the changes' },
    { name: '/init', description: 'Create CLAUDE.md', input_hint: 'what to focus on' },
    { name: 'preview', description: 'Show a preview' },
    { name: 'compact', description: 'Summarise to free context' },
    { name: '' }, { description: 'no name' }, null, { name: 'review', description: 'duplicate' },
  ];
  assert.deepEqual(filterCommands(commands, '').map((c) => c.name), ['review', 'init', 'preview', 'compact']);
  assert.deepEqual(filterCommands(commands, 'rev').map((c) => c.name), ['review', 'preview']);
  assert.deepEqual(filterCommands(commands, 'REV').map((c) => c.name), ['review', 'preview']);
  assert.deepEqual(filterCommands(commands, 'context').map((c) => c.name), ['compact']);
  assert.deepEqual(filterCommands(commands, 're').map((c) => c.name), ['review', 'preview'], 'two letters match names only');
  assert.deepEqual(filterCommands(commands, 'sum').map((c) => c.name), ['compact']);
  assert.deepEqual(filterCommands(commands, 'zzz'), []);
  assert.deepEqual(filterCommands(null, ''), []);
  assert.equal(filterCommands(commands, '', 2).length, 2);
  assert.deepEqual(filterCommands(commands, 'in')[0], { name: 'init', description: 'Create CLAUDE.md', input_hint: 'what to focus on' });
  assert.equal(commandIn(commands, '/init ').input_hint, 'what to focus on');
  assert.equal(commandIn(commands, '/init focus on tests').name, 'init');
  assert.equal(commandIn(commands, '/init'), null);
  assert.equal(commandIn(commands, '/nope x'), null);
});

test('the empty placeholder of a turn that began with a tool call is hidden, nothing else', () => {
  const agent = (text, finish_reason, state = 'final') => ({ role: 'agent', text, finish_reason, state });
  assert.equal(isHiddenMessage(agent(' ', 'tool_call')), true);
  assert.equal(isHiddenMessage(agent('', 'tool_call')), true);
  assert.equal(isHiddenMessage(agent('Reading the file.', 'tool_call')), false);
  assert.equal(isHiddenMessage(agent(' ', 'stop')), false);
  assert.equal(isHiddenMessage(agent(' ', null, 'streaming')), false);
  assert.equal(isHiddenMessage({ role: 'user', text: ' ', finish_reason: 'tool_call', state: 'final' }), false);
});

test('an empty typing bubble is held back while an approval of its turn waits, and only then', () => {
  const bubble = (text, state = 'streaming', interaction = 'int_1') => ({ role: 'agent', text, state, interaction_id: interaction });
  const waiting = new Set(['int_1']);
  assert.equal(isHeldBubble(bubble(' '), waiting), true);
  assert.equal(isHeldBubble(bubble(''), waiting), true);
  assert.equal(isHeldBubble(bubble('Editing the file…'), waiting), false, 'a bubble with words stays');
  assert.equal(isHeldBubble(bubble(' '), new Set()), false, 'no approval waits: the dots say the agent is writing');
  assert.equal(isHeldBubble(bubble(' ', 'streaming', 'int_2'), waiting), false, 'another turn\'s approval');
  assert.equal(isHeldBubble(bubble(' ', 'final'), waiting), false);
  assert.equal(isHeldBubble({ role: 'user', text: '', state: 'streaming', interaction_id: 'int_1' }, waiting), false);
});

test('a message that something of its own turn follows writes no more: no typing dots', () => {
  const item = (type, id, interaction) => ({ type, id, value: { interaction_id: interaction } });
  const items = [item('message', 'm_user', 'int_1'), item('message', 'm_1', 'int_1'), item('task', 't_1', 'int_1'),
    item('message', 'm_2', 'int_1'), item('approval', 'a_1', 'int_1'), item('message', 'm_3', 'int_1'),
    item('message', 'm_other', 'int_2')];
  assert.deepEqual([...settledMessages(items)].sort(), ['m_1', 'm_2', 'm_user']);
  assert.deepEqual([...settledMessages([item('message', 'm_1', 'int_1'), item('message', 'm_2', 'int_2')])], [],
    'another turn after it: the message may still be written');
});

test('the agent is named as people know it, not by its npm package', () => {
  assert.equal(agentLabel('@zed-industries/claude-agent-acp'), 'Claude Code');
  assert.equal(agentLabel('@zed-industries/codex-acp'), 'Codex');
  assert.equal(agentLabel('gemini'), 'Gemini CLI');
  assert.equal(agentLabel('@acme/helper'), 'helper');
  assert.equal(agentLabel('browser-test'), 'browser-test');
  assert.equal(agentLabel(''), '');
  assert.equal(agentLabel(null), '');
});
