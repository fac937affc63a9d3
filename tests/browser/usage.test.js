// Usage and a command's output on the phone (issue 36 item 2): the context meter in the chat's header
// from the latest reply that reports the context, the tokens a turn used under its reply, a command's
// output shown live in its task card (monospace, capped, with its exit status), and a message sent
// while an earlier turn runs shown as queued until that turn ends.
//
// No relay-bridge here: the test plays the bridge on relayd's bridge REST routes with what relay-bridge
// sends for an acp: agent (docs/bridge.md "Usage", "Shell output", "A message sent while a turn runs").
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Relay, launch, newPage, signIn, screenshot, axe, waitFor, sleep } from './lib.js';

const PHONE_360 = { width: 360, height: 740 };

let relay;
let browser;
let token;
let bridgeToken;
let sessionId;
let page;
const problems = [];

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
let keys = 0;
const key = () => `k${Date.now()}-${keys++}`;

async function userSays(text) {
  return (await me('POST', `/v1/me/sessions/${sessionId}/send`, { text })).interaction_id;
}

async function agentOpens(interaction) {
  return (await bridge('sendMessage', { session_id: sessionId, interaction_id: interaction, text: '', idempotency_key: key() })).message_id;
}

async function agentEnds(messageId, text, usage) {
  await bridge('sendMessageDelta', { message_id: messageId, delta: text, idempotency_key: key() });
  await bridge('sendMessageEnd', { message_id: messageId, finish_reason: 'stop', usage, idempotency_key: key() });
}

const LINES = Array.from({ length: 30 }, (_, i) => `PASS test/case_${String(i + 1).padStart(2, '0')}.test.js (${(i * 7) % 50} ms)`);

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  const start = await call('POST', '/v1/pairing/start', '', { connector_type: 'acp', host_label: 'laptop' });
  await me('POST', '/v1/me/pairing/claim', { code: start.code });
  const paired = await call('POST', '/v1/pairing/poll', '', { poll_token: start.poll_token });
  assert.equal(paired.status, 'paired');
  bridgeToken = paired.token;
  sessionId = (await me('POST', '/v1/me/sessions', { installation_id: paired.installation_id, title: 'Run the tests' })).session_id;
});

after(async () => {
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

test('the context meter, a turn\'s tokens, live command output and a queued message', async () => {
  page = await newPage(browser, relay, PHONE_360);
  await signIn(page, relay);
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.waitForSelector('.composer-input');
  const meter = page.locator('.context-meter');
  assert.equal(await meter.isHidden(), true, 'no meter before a reply reports the context');

  // A first turn that reports its tokens and the context.
  const first = await userSays('Run the tests');
  const reply = await agentOpens(first);
  await agentEnds(reply, 'I will run them.', {
    input_tokens: 1200, output_tokens: 340, cached_tokens: 30000, total_tokens: 31540,
    context_used: 42000, context_size: 200000, cost: { amount: 0.25, currency: 'USD' } });
  await waitFor('the meter', async () => !(await meter.isHidden()));
  assert.match(await meter.locator('.context-label').innerText(), /^Context 42 k \/ 200 k · \$0\.25$/);
  assert.equal(await meter.getAttribute('aria-valuenow'), '42000');
  assert.equal(await meter.getAttribute('aria-valuemax'), '200000');
  const width = await meter.locator('.context-fill').evaluate((e) => e.style.width);
  assert.equal(width, '21%');
  const meta = page.locator(`.msg-agent`).last().locator('.msg-meta');
  await waitFor('the turn\'s tokens', async () => /1\.2 k in · 340 out tokens/.test(await meta.innerText()));

  // A second turn runs a command: its output shows while it runs, then its exit status.
  const second = await userSays('Again, with the slow ones');
  await agentOpens(second);
  const ids = { session_id: sessionId, interaction_id: second };
  await bridge('createTask', { ...ids, task_id: 'call_sh', kind: 'execute', status_label: 'Run npm test', name: 'Run npm test', args: { command: 'npm test' } });
  await bridge('updateTask', { ...ids, task_id: 'call_sh', status_label: 'Run npm test', partial_result: { content: [], locations: [], terminal: { output: `${LINES.slice(0, 3).join('\n')}\n` } } });
  const card = page.locator('section.task[data-key="t:call_sh"]');
  const output = card.locator('pre.shell-output');
  await waitFor('the first lines while it runs', async () => (await output.count()) === 1 && /case_03/.test(await output.innerText()));
  assert.match(await card.getAttribute('class'), /task-running/);
  assert.equal(await card.locator('.shell-status').innerText(), 'Running…');
  assert.match(await output.evaluate((e) => getComputedStyle(e).fontFamily), /mono|Menlo|Consolas/i);

  // A message sent meanwhile is queued behind the running turn.
  const third = await userSays('And then the linter');
  const queuedReply = await agentOpens(third);
  const queued = page.locator('.msg-user.msg-queued');
  await waitFor('the queued message', async () => (await queued.count()) === 1);
  assert.match(await queued.innerText(), /And then the linter/);
  assert.equal(await queued.locator('.pill-queued').innerText(), 'Queued');
  // its reply's empty placeholder is not shown: nothing is being written for it yet
  assert.equal(await page.locator(`[data-key="m:${queuedReply}"]`).count(), 0);

  // More output: the box is capped in height and follows the end.
  await bridge('updateTask', { ...ids, task_id: 'call_sh', status_label: 'Run npm test', partial_result: { content: [], locations: [], terminal: { output: `${LINES.join('\n')}\n`, truncated: true } } });
  await waitFor('the later lines', async () => /case_30/.test(await output.innerText()));
  const box = await output.evaluate((e) => ({ height: e.clientHeight, scroll: e.scrollHeight, top: e.scrollTop, font: parseFloat(getComputedStyle(e).fontSize) }));
  assert.ok(box.height < box.scroll, 'the output is capped in height');
  assert.ok(box.height <= 17 * box.font, `at most about 14 lines are shown (${box.height}px)`);
  await waitFor('scrolled to the end', async () => output.evaluate((e) => e.scrollTop + e.clientHeight >= e.scrollHeight - 2));
  assert.match(await card.innerText(), /Earlier output not shown/);
  await page.locator('.timeline > *').last().scrollIntoViewIfNeeded();
  await card.scrollIntoViewIfNeeded();
  await sleep(150);
  await screenshot(page, 'phone360-light-shell-running');
  assert.deepEqual(await axe(page), []);

  await bridge('finishTask', { ...ids, task_id: 'call_sh', status: 'failed', name: 'Run npm test', status_label: 'Run npm test',
    error: { message: 'the command failed' }, result: { content: [], locations: [], terminal: { output: `${LINES.join('\n')}\nFAIL 1 test\n`, exit_status: 1 } } });
  await waitFor('the exit status', async () => (await card.locator('.shell-status').count()) === 1 && (await card.locator('.shell-status').innerText()) === 'Exit status 1');
  assert.match(await card.locator('.shell-status').getAttribute('class'), /shell-status-failed/);
  const messages = await me('GET', `/v1/me/sessions/${sessionId}/messages?limit=100`);
  const placeholder = messages.messages.find((m) => m.role === 'agent' && m.interaction_id === second);
  await agentEnds(placeholder.message_id, 'One test fails.', { input_tokens: 900, output_tokens: 60, context_used: 61000, context_size: 200000 });
  // The second turn ended: the third message is no longer queued, and the meter reads the latest figures.
  await waitFor('no longer queued', async () => (await queued.count()) === 0);
  await waitFor('its reply placeholder once it runs', async () => (await page.locator(`[data-key="m:${queuedReply}"]`).count()) === 1);
  await waitFor('the meter moved', async () => /^Context 61 k \/ 200 k$/.test(await meter.locator('.context-label').innerText()));
  await agentEnds(queuedReply, 'The linter is clean.', { input_tokens: 300, output_tokens: 20 });
  // A reply without context figures leaves the meter at the latest that had them.
  await waitFor('the last reply', async () => /300 in · 20 out tokens/.test(await page.locator('.msg-agent').last().locator('.msg-meta').innerText()));
  assert.match(await meter.locator('.context-label').innerText(), /^Context 61 k \/ 200 k$/);
  const text = await page.locator('.timeline').innerText();
  assert.doesNotMatch(text, /\bundefined\b|\bnull\b|\[object Object\]|NaN/);
  collect(page);
  await page.context().close();
});

test('screenshots at 360 px, light and dark, pass axe', async () => {
  for (const scheme of ['light', 'dark']) {
    const p = await newPage(browser, relay, PHONE_360, { colorScheme: scheme });
    await signIn(p, relay);
    await p.goto(`${relay.url}/#/s/${sessionId}`);
    const card = p.locator('section.task[data-key="t:call_sh"]');
    await card.locator('.shell-output').waitFor();
    await p.locator('.context-meter:not([hidden])').waitFor();
    await card.scrollIntoViewIfNeeded();
    await sleep(150);
    await screenshot(p, `phone360-${scheme}-shell-output`);
    await p.locator('.msg-agent').last().scrollIntoViewIfNeeded();
    await sleep(100);
    await screenshot(p, `phone360-${scheme}-usage`);
    assert.deepEqual((await axe(p)).map((v) => `${scheme}: ${v}`), []);
    collect(p);
    await p.context().close();
  }
});
