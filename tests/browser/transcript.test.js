// What an agent sends, on the phone (issue 22): tool-call cards with diffs and
// command output, a plan that changes in place, thinking, the pending edit's
// diff inside the approval card, the agent's "/" commands in the composer,
// and the whole conversation the same after a reload (the session timeline).
//
// No relay-bridge here: the test pairs an installation through the pairing
// routes and plays the bridge itself on relayd's bridge REST routes, with the
// payloads an ACP agent turns into (docs/api.md, "Content blocks" and "Timeline"; docs/bridge.md, "acp:COMMAND").
// The tests run in order and share one relay, one account, one installation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, launch, newPage, signIn, screenshot, axe, waitFor, sleep, WAIT } from './lib.js';

const PHONE_390 = { width: 390, height: 844 };
const PHONE_360 = { width: 360, height: 740 };
const PROJECT = '/home/alice/projects/relay-demo';

let relay;
let browser;
let token;
let bridgeToken;
let installationId;
let sessionId;
let interactionId;
let page;
const problems = [];

// A call to relayd that waits out a 429 (the tests write faster than a bridge would).
async function call(method, path, auth, body) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(`${relay.url}${path}`, {
      method,
      headers: { ...(auth ? { Authorization: `Bearer ${auth}` } : {}), 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await r.json();
    if (r.status === 429 && attempt < 20) {
      await sleep(Math.min(json.error && json.error.retry_after_ms ? json.error.retry_after_ms : 500, 2000));
      continue;
    }
    if (!json.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json.error)}`);
    return json.result;
  }
}

const me = (method, path, body) => call(method, path, token, body);
const bridge = (route, body) => call('POST', `/v1/bridge/${route}`, bridgeToken, body);

// The user says something; the agent's answers go into its interaction.
async function userSays(text) {
  const sent = await me('POST', `/v1/me/sessions/${sessionId}/send`, { text });
  interactionId = sent.interaction_id;
  return sent;
}

let keys = 0;
const key = () => `k${Date.now()}-${keys++}`;

async function agentSays(text, finish = 'stop') {
  const { message_id: messageId } = await bridge('sendMessage', { session_id: sessionId, interaction_id: interactionId, text: '', idempotency_key: key() });
  await bridge('sendMessageDelta', { message_id: messageId, delta: text, idempotency_key: key() });
  await bridge('sendMessageEnd', { message_id: messageId, finish_reason: finish, idempotency_key: key() });
  return messageId;
}

const ids = () => ({ session_id: sessionId, interaction_id: interactionId });

// A 60-line file and its edit: line 30 changed, a line added after 45.
const OLD_FILE = Array.from({ length: 60 }, (_, i) => `const line${i + 1} = ${i + 1};`).join('\n') + '\n';
const NEW_FILE = OLD_FILE.split('\n').map((l, i) => (i === 29 ? 'const line30 = "thirty"; // changed by the agent, and long enough to need a sideways scroll on a phone' : l))
  .flatMap((l, i) => (i === 44 ? [l, 'const added = true;'] : [l])).join('\n');
const EDIT_DIFF = { type: 'diff', path: `${PROJECT}/src/numbers.js`, old_text: OLD_FILE, new_text: NEW_FILE };
const NEW_DIFF = { type: 'diff', path: `${PROJECT}/README.md`, old_text: null, new_text: '# Demo\n\nA new file.\n' };

// The chat as a list of lines: key, kind, state and the item's head (its text, a card's title and status, an approval's outcome).
async function chatItems(p) {
  return p.$$eval('.timeline > *', (els) => els.map((e) => {
    const kind = e.classList.contains('msg') ? 'message' : e.classList.contains('task') ? 'task' : 'approval';
    const states = e.className.split(' ').filter((c) => /^(msg-(user|agent)|task-(running|completed|failed|cancelled|plan|think)|approval-(pending|resolved|expired))$/.test(c));
    const parts = [...e.querySelectorAll('.msg-body, .task-head, .thinking summary, .plan-list, .approval-head, .approval-outcome')].map((x) => x.innerText);
    return `${e.dataset.key} ${kind} ${states.join(',')} ${parts.join(' | ').replace(/\s+/g, ' ').trim()}`;
  }));
}

async function noStrays(p) {
  const text = await p.$eval('.timeline', (e) => e.innerText);
  assert.doesNotMatch(text, /\bundefined\b|\bnull\b|\[object Object\]|NaN/, 'no stray null, undefined or [object Object] in the chat');
}

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  // Pairing as a bridge does it: start, the user claims the code, the poll gets the bridge token.
  const start = await call('POST', '/v1/pairing/start', '', { connector_type: 'acp', host_label: 'laptop' });
  await me('POST', '/v1/me/pairing/claim', { code: start.code });
  const paired = await call('POST', '/v1/pairing/poll', '', { poll_token: start.poll_token });
  assert.equal(paired.status, 'paired');
  bridgeToken = paired.token;
  installationId = paired.installation_id;
  sessionId = (await me('POST', '/v1/me/sessions', { installation_id: installationId, title: 'Fix the numbers' })).session_id;
});

after(async () => {
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

test('tool calls: a diff folded around its changes, command output, a new file, a failure; one status each', async () => {
  page = await newPage(browser, relay, PHONE_390);
  await signIn(page, relay);
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.waitForSelector('.composer-input');

  await userSays('Make line 30 a word, and add a README');
  await agentSays('I will look at the file first.', 'tool_call');
  // The turn goes on after a message that ended for a tool call: it can still be stopped.
  await page.waitForSelector('button[aria-label="Stop the reply"]:not([hidden])');
  assert.doesNotMatch(await page.locator('.msg-agent').last().innerText(), /tool_call/);

  // An edit: created, its diff while it runs, then done.
  await bridge('createTask', { ...ids(), task_id: 'call_edit', kind: 'edit', status_label: 'Edit src/numbers.js', args: { path: EDIT_DIFF.path } });
  const card = page.locator('section.task[data-key="t:call_edit"]');
  await card.waitFor();
  await waitFor('the running edit', async () => /Running/.test(await card.innerText()));
  await bridge('updateTask', { ...ids(), task_id: 'call_edit', partial_result: { content: [EDIT_DIFF], locations: [{ path: EDIT_DIFF.path }] } });
  await waitFor('the diff while it runs', async () => (await card.locator('.diff').count()) === 1);
  await bridge('finishTask', { ...ids(), task_id: 'call_edit', status: 'completed', name: 'Edit src/numbers.js',
    result: { content: [EDIT_DIFF], locations: [{ path: EDIT_DIFF.path }] } });
  await waitFor('the finished edit', async () => (await card.getAttribute('class')).includes('task-completed'));
  assert.equal(await card.locator('.pill').innerText(), 'Done');
  assert.equal(await card.locator('.task-kind').textContent(), 'Edit');
  assert.equal(await card.locator('.task-name').innerText(), 'Edit src/numbers.js');
  const diff = card.locator('.diff');
  assert.match(await diff.locator('.diff-head').innerText(), /numbers\.js\s*\+2\s*−1/);
  assert.equal(await diff.locator('.diff-add').count(), 2);
  assert.equal(await diff.locator('.diff-del').count(), 1);
  // Line numbers: the changed line is 30 on both sides.
  const removed = await diff.locator('.diff-del .diff-ln').allInnerTexts();
  assert.deepEqual(removed, ['30', '']);
  // Folds: before the first change, between the two, after the last.
  const folds = await diff.locator('.diff-fold').allInnerTexts();
  assert.deepEqual(folds, ['26 unchanged lines', '9 unchanged lines', '12 unchanged lines']);
  const lines = await diff.locator('.diff-line').count();
  await diff.locator('.diff-fold').first().click();
  assert.equal(await diff.locator('.diff-line').count(), lines + 26);
  assert.equal(await diff.locator('.diff-fold').count(), 2);
  // Arguments behind a disclosure, closed.
  const args = card.locator('details.task-detail', { hasText: 'Arguments' });
  assert.equal(await args.evaluate((d) => d.open), false);
  await args.locator('summary').click();
  assert.match(await args.innerText(), /numbers\.js/);
  // At 360 px the long line wraps inside the diff (issue 35: scrolled sideways, its end was out of sight): neither
  // the page nor the diff scrolls sideways, and the changed line takes more than one line of the box.
  await page.setViewportSize(PHONE_360);
  const widths = await page.evaluate(() => {
    const body = document.querySelector('[data-key="t:call_edit"] .diff-body');
    const long = [...body.querySelectorAll('.diff-add .diff-code')].find((e) => e.textContent.includes('sideways scroll on a phone'));
    return { page: document.documentElement.scrollWidth, view: window.innerWidth, body: body.scrollWidth, box: body.clientWidth,
      lines: Math.round(long.getBoundingClientRect().height / parseFloat(getComputedStyle(long).lineHeight)) };
  });
  assert.ok(widths.page <= widths.view, `the page does not scroll sideways (${widths.page} > ${widths.view})`);
  assert.ok(widths.body <= widths.box, `the diff wraps inside its box (${widths.body} > ${widths.box})`);
  assert.ok(widths.lines >= 2, 'the long line wraps');
  await page.setViewportSize(PHONE_390);

  // A command and its output, monospace; then a new file; then one that fails.
  await bridge('createTask', { ...ids(), task_id: 'call_run', kind: 'execute', status_label: 'Run npm test', args: { command: 'npm test' } });
  await bridge('finishTask', { ...ids(), task_id: 'call_run', status: 'completed', name: 'Run npm test',
    result: { content: [{ type: 'text', text: '```console\n> demo@1.0.0 test\n> node --test\n\n# pass 12\n# fail 0\n```' }], locations: [], raw_output: { exit_code: 0 } } });
  const run = page.locator('section.task[data-key="t:call_run"]');
  await waitFor('the command output', async () => (await run.locator('pre.block-output').count()) === 1);
  assert.match(await run.locator('pre.block-output').innerText(), /# pass 12/);
  assert.doesNotMatch(await run.locator('pre.block-output').innerText(), /```/, 'the fence Claude Code wraps output in is not shown');
  assert.match(await run.locator('pre.block-output').evaluate((e) => getComputedStyle(e).fontFamily), /mono|Menlo|Consolas/i);
  assert.equal(await run.locator('.task-kind').textContent(), 'Run');

  await bridge('createTask', { ...ids(), task_id: 'call_new', kind: 'edit', status_label: 'Write README.md', args: { path: NEW_DIFF.path } });
  await bridge('finishTask', { ...ids(), task_id: 'call_new', status: 'completed', name: 'Write README.md', result: { content: [{ ...NEW_DIFF, truncated: true }] } });
  const created = page.locator('section.task[data-key="t:call_new"]');
  await waitFor('the new file', async () => (await created.locator('.diff-badge-new').count()) === 1);
  assert.equal(await created.locator('.diff-del').count(), 0);
  assert.equal(await created.locator('.diff-add').count(), 3);
  assert.match(await created.innerText(), /Cut short/);

  await bridge('createTask', { ...ids(), task_id: 'call_fail', kind: 'read', status_label: 'Read secrets.txt', args: { path: `${PROJECT}/secrets.txt` } });
  await bridge('finishTask', { ...ids(), task_id: 'call_fail', status: 'failed', name: 'Read secrets.txt', error: { message: 'No such file' } });
  const failed = page.locator('section.task[data-key="t:call_fail"]');
  await waitFor('the failure', async () => (await failed.getAttribute('class') || '').includes('task-failed'));
  assert.equal(await failed.locator('.pill').innerText(), 'Failed');
  assert.equal(await failed.locator('.task-error').innerText(), 'No such file');
  await agentSays('Done: line 30 reads "thirty" and README.md exists.');
  await page.waitForSelector('button[aria-label="Stop the reply"]', { state: 'hidden' });
  await noStrays(page);
  assert.deepEqual(await axe(page), []);
  collect(page);
});

test('a plan is one checklist that changes in place; thinking stays folded', async () => {
  await userSays('Now plan the release');
  const planId = `plan_${interactionId}`;
  const entries = (statuses) => ['Bump the version', 'Write the changelog', 'Tag the release'].map((content, i) =>
    ({ content, priority: i === 0 ? 'high' : 'medium', status: statuses[i] }));
  await bridge('createTask', { ...ids(), task_id: `think_${interactionId}_1`, kind: 'think', status_label: 'Thinking' });
  await bridge('updateTask', { ...ids(), task_id: `think_${interactionId}_1`, partial_result: { text: 'The release needs three steps.' } });
  await bridge('finishTask', { ...ids(), task_id: `think_${interactionId}_1`, status: 'completed', result: { text: 'The release needs three steps; the version first.' } });
  await bridge('createTask', { ...ids(), task_id: planId, kind: 'plan', status_label: 'Plan' });
  await bridge('updateTask', { ...ids(), task_id: planId, partial_result: { entries: entries(['pending', 'pending', 'pending']) } });
  const plan = page.locator(`section.task[data-key="t:${planId}"]`);
  await waitFor('three steps', async () => (await plan.locator('.plan-entry').count()) === 3);
  const element = await plan.elementHandle();
  assert.match(await plan.innerText(), /0 of 3 done/);
  assert.match(await plan.innerText(), /high priority/);
  await bridge('updateTask', { ...ids(), task_id: planId, partial_result: { entries: entries(['completed', 'in_progress', 'pending']) } });
  await waitFor('the first step done', async () => (await plan.locator('.plan-completed').count()) === 1);
  assert.equal(await plan.locator('.plan-in_progress').count(), 1);
  assert.match(await plan.innerText(), /1 of 3 done/);
  await screenshot(page, 'phone390-light-plan-running');
  await bridge('finishTask', { ...ids(), task_id: planId, status: 'completed', result: { entries: entries(['completed', 'completed', 'completed']) } });
  await waitFor('all done', async () => /3 of 3 done/.test(await plan.innerText()));
  assert.equal(await page.locator('section.task-plan').count(), 1, 'one plan card, not one per update');
  assert.ok(await element.evaluate((e) => e.isConnected), 'the same card, changed in place');

  const thinking = page.locator(`section.task[data-key="t:think_${interactionId}_1"] details.thinking`);
  assert.equal(await thinking.evaluate((d) => d.open), false);
  assert.match(await thinking.locator('summary').innerText(), /Thinking/);
  await thinking.locator('summary').click();
  assert.match(await thinking.innerText(), /the version first/);
  await agentSays('The plan is done.');
  await noStrays(page);
  collect(page);
});

// Waits on relayd's side of the contract (approval `content`, branch timeline).
test('an approval shows the pending edit\'s diff above its answers; a command shows monospace', async () => {
  await userSays('Change line 30 again');
  await agentSays('I need to edit numbers.js.', 'tool_call');
  await bridge('createTask', { ...ids(), task_id: 'call_edit2', kind: 'edit', status_label: 'Edit src/numbers.js', args: { path: EDIT_DIFF.path } });
  await bridge('requestApproval', { ...ids(), approval_id: 'apr_edit', action: 'edit', title: 'Edit src/numbers.js',
    message: 'The agent wants to edit numbers.js.', severity: 'medium', command: EDIT_DIFF.path, tool_call_id: 'call_edit2',
    content: [EDIT_DIFF], idempotency_key: 'apr_edit' });
  const card = page.locator('.approval-pending[data-key="a:apr_edit"]');
  await card.waitFor({ timeout: WAIT });
  await waitFor('the diff in the approval card', async () => (await card.locator('.diff').count()) === 1);
  assert.equal(await card.locator('.diff-add').count(), 2);
  // The diff comes before the answers.
  assert.ok(await card.evaluate((el) => {
    const diff = el.querySelector('.diff');
    const actions = el.querySelector('.approval-actions');
    return !!(diff.compareDocumentPosition(actions) & Node.DOCUMENT_POSITION_FOLLOWING);
  }));
  await card.locator('.diff').scrollIntoViewIfNeeded();
  await screenshot(page, 'phone390-light-approval-diff');
  assert.deepEqual(await axe(page), []);
  // The Approvals screen shows the same diff.
  await page.goto(`${relay.url}/#/approvals`);
  await page.waitForSelector('.approvals-list .approval-pending .diff');
  await screenshot(page, 'phone390-light-approvals-diff');
  assert.deepEqual(await axe(page), []);
  const wide = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, main: document.querySelector('main').scrollWidth, view: window.innerWidth }));
  assert.ok(wide.page <= wide.view && wide.main <= wide.view, `the Approvals screen does not scroll sideways (${JSON.stringify(wide)})`);
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await card.waitFor();
  await card.locator('button[data-choice="once"]').click();
  await page.waitForSelector('[data-key="a:apr_edit"] .approval-outcome');
  const decided = await me('GET', '/v1/me/snapshot');
  assert.equal(decided.pending_approvals.length, 0);
  await bridge('finishTask', { ...ids(), task_id: 'call_edit2', status: 'completed', name: 'Edit src/numbers.js', result: { content: [EDIT_DIFF] } });
  await agentSays('Edited after your approval.');

  // An execute approval: its command, monospace; denied.
  await userSays('Clean up');
  await bridge('requestApproval', { ...ids(), approval_id: 'apr_rm', action: 'execute', title: 'Run rm -rf build',
    message: 'The agent wants to run a command.', severity: 'high', command: 'rm -rf build', tool_call_id: 'call_rm',
    content: [{ type: 'text', text: 'rm -rf build' }], idempotency_key: 'apr_rm' });
  const run = page.locator('.approval-pending[data-key="a:apr_rm"]');
  await run.waitFor({ timeout: WAIT });
  assert.equal(await run.locator('pre.approval-command').innerText(), 'rm -rf build');
  assert.match(await run.locator('pre.approval-command').evaluate((e) => getComputedStyle(e).fontFamily), /mono|Menlo|Consolas/i);
  await run.locator('button[data-choice="deny"]').click();
  await page.waitForSelector('[data-key="a:apr_rm"] .approval-outcome');
  await agentSays('I did not clean up.');
  await noStrays(page);
  collect(page);
});

// Waits on relayd's side of the contract (manifest `commands`, installation_updated, branch timeline).
test('"/" in the composer offers the agent\'s commands, filtered, by keyboard and by touch', async () => {
  await bridge('setManifest', { agent: { name: 'claude-code', version: '1.0', mode: 'plan' }, tools: [], commands: [
    { name: 'review', description: 'Review the changes on this branch', input_hint: 'what to focus on' },
    { name: 'init', description: 'Write a CLAUDE.md for this project' },
    { name: 'compact', description: 'Summarise the conversation to free context' },
    { name: 'pr-comments', description: 'Read the comments of a pull request', input_hint: 'PR number' },
  ] });
  await waitFor('the commands in /v1/me', async () =>
    ((await me('GET', '/v1/me')).installations.find((i) => i.id === installationId).commands || []).length === 4);
  // The agent's mode shows beside the machine's name.
  await waitFor('the mode in the header', async () => /Mode: plan/.test(await page.locator('.chat-subtitle').innerText()));
  const input = page.locator('.composer-input');
  await input.click();
  await input.type('/');
  const list = page.locator('#composer-commands');
  await waitFor('the command list', async () => (await list.locator('[role="option"]').count()) === 4);
  assert.equal(await input.getAttribute('aria-activedescendant'), 'composer-command-0');
  await screenshot(page, 'phone390-light-commands');
  assert.deepEqual(await axe(page), []);
  await input.type('r');
  assert.deepEqual(await list.locator('.command-name').allInnerTexts(), ['/review', '/pr-comments']);
  await input.press('ArrowDown');
  assert.equal(await list.locator('[aria-selected="true"] .command-name').innerText(), '/pr-comments');
  await input.press('Enter');
  assert.equal(await input.inputValue(), '/pr-comments ');
  assert.equal(await list.isHidden(), true);
  assert.match(await page.locator('#composer-hint').innerText(), /PR number/);
  // Escape closes the list; touch picks from it.
  await input.fill('');
  await input.type('/re');
  await list.locator('[role="option"]').first().waitFor();
  await input.press('Escape');
  assert.equal(await list.isHidden(), true);
  await input.fill('');
  await input.type('/c');
  await list.locator('[role="option"]', { hasText: '/compact' }).click();
  assert.equal(await input.inputValue(), '/compact ');
  // Text that does not start with "/" offers nothing.
  await input.fill('hello /review');
  assert.equal(await list.isHidden(), true);
  await input.fill('');
  collect(page);
});

// Waits on relayd's side of the contract (the timeline route, durable tasks, branch timeline).
test('after a reload the chat is the same: messages, tool calls, plans and approvals with their decisions, in order', async () => {
  await sleep(300);
  const before = await chatItems(page);
  assert.ok(before.some((i) => i.includes('approval-resolved')), before.join('\n'));
  // Order: the reply that came after an approval sits below it.
  const at = (prefix) => before.findIndex((i) => i.startsWith(prefix));
  assert.ok(at('a:apr_edit') > at('t:call_edit2'), `the approval after the tool call it asks for:\n${before.join('\n')}`);
  const edited = before.findIndex((i) => i.includes('Edited after your approval'));
  assert.ok(edited > at('a:apr_edit'), 'the reply below the approval');
  await page.reload();
  await page.waitForSelector('.composer-input');
  await waitFor('the timeline read', async () => (await chatItems(page)).length >= before.length);
  const after = await chatItems(page);
  assert.deepEqual(after, before);
  const outcomes = await page.$$eval('.approval-outcome', (els) => els.map((e) => e.textContent));
  assert.deepEqual(outcomes, ['Approved', 'Denied']);
  await noStrays(page);
  collect(page);
});

// Waits on the timeline route too: its pages, read further back as the reader scrolls up.
test('a long chat: the older pages of the timeline come as the reader scrolls up, and nothing is missing or doubled', async () => {
  const long = (await me('POST', '/v1/me/sessions', { installation_id: installationId, title: 'A long chat' })).session_id;
  const saved = sessionId;
  sessionId = long;
  for (let i = 1; i <= 40; i++) {
    await userSays(`question ${i}`);
    await bridge('createTask', { ...ids(), task_id: `call_${i}`, kind: 'read', status_label: `Read file ${i}`, args: { path: `/f/${i}` } });
    await bridge('finishTask', { ...ids(), task_id: `call_${i}`, status: 'completed', name: `Read file ${i}`, result: { content: [{ type: 'text', text: `content ${i}` }] } });
    await agentSays(`answer ${i}`);
  }
  sessionId = saved;
  const p = await newPage(browser, relay, PHONE_390);
  await signIn(p, relay);
  await p.goto(`${relay.url}/#/s/${long}`);
  await p.waitForSelector('.timeline .msg');
  const first = await chatItems(p);
  assert.ok(first.length < 120, `a first page, not everything (${first.length})`);
  for (let round = 0; round < 10 && (await chatItems(p)).length < 120; round++) {
    await p.$eval('.scroller', (e) => { e.scrollTop = 0; e.dispatchEvent(new Event('scroll')); });
    await sleep(400);
  }
  const all = await chatItems(p);
  assert.equal(all.length, 120);
  assert.equal(new Set(all.map((i) => i.split(' ')[0])).size, 120);
  const order = all.map((i) => i.replace(/^\S+ /, '')).filter((i) => /question|answer|Read file/.test(i))
    .map((i) => /(question|answer|Read file) (\d+)/.exec(i)).map((m) => `${m[1]} ${m[2]}`);
  const expected = [];
  for (let i = 1; i <= 40; i++) expected.push(`question ${i}`, `Read file ${i}`, `answer ${i}`);
  assert.deepEqual(order, expected);
  collect(p);
  await p.context().close();
});

test('screenshots at phone size, light and dark, pass axe', async () => {
  {
    const p = await newPage(browser, relay, { width: 1280, height: 800 }, { colorScheme: 'dark' });
    await signIn(p, relay);
    await p.goto(`${relay.url}/#/s/${sessionId}`);
    await p.waitForSelector('section.task[data-key="t:call_edit"] .diff');
    await p.locator('section.task[data-key="t:call_edit"]').scrollIntoViewIfNeeded();
    await screenshot(p, 'desktop-dark-tool-diff');
    collect(p);
    await p.context().close();
  }
  for (const [size, viewport] of [['phone390', PHONE_390], ['phone360', PHONE_360]]) {
    for (const scheme of ['light', 'dark']) {
      const p = await newPage(browser, relay, viewport, { colorScheme: scheme });
      await signIn(p, relay);
      await p.goto(`${relay.url}/#/s/${sessionId}`);
      await p.waitForSelector('section.task[data-key="t:call_edit"] .diff');
      await p.locator('section.task[data-key="t:call_edit"]').scrollIntoViewIfNeeded();
      await sleep(150);
      await screenshot(p, `${size}-${scheme}-tool-diff`);
      await p.locator('section.task[data-key="t:call_run"]').scrollIntoViewIfNeeded();
      await screenshot(p, `${size}-${scheme}-tool-output`);
      await p.locator('.task-plan').first().scrollIntoViewIfNeeded();
      await screenshot(p, `${size}-${scheme}-plan`);
      await p.locator('[data-key="a:apr_edit"]').scrollIntoViewIfNeeded().catch(() => {});
      await screenshot(p, `${size}-${scheme}-approval`);
      assert.deepEqual((await axe(p)).map((v) => `${size} ${scheme}: ${v}`), []);
      await p.locator('.composer-input').type('/');
      await p.locator('#composer-commands [role="option"]').first().waitFor();
      await screenshot(p, `${size}-${scheme}-commands`);
      assert.deepEqual((await axe(p)).map((v) => `${size} ${scheme} commands: ${v}`), []);
      collect(p);
      await p.context().close();
    }
  }
});
