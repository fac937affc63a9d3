// A turn reads in the order it happened, whatever the agent kind (issue 40,
// item 6; docs/bridge.md "jsonl:COMMAND"). A real relay-bridge runs
// tests/e2e/order_agent.py, a jsonl agent that writes a line, runs a read,
// writes a second line, asks to run `make check` and, once approved, says so.
// The chat shows them as they came: message, tool call, message, approval,
// message; the same after a reload (the timeline read back). Screenshots at
// 360 px, light and dark.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, waitFor, PHONE, ROOT } from './lib.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'e2e', 'order_agent.py')}`;
const TOLD = 'Told: allow-once. All checks passed.';

let relay;
let browser;
let bridge;
let page;
let sessionId;
const problems = [];

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  const token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('order-box');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  const installationId = await pairing.done;
  bridge.run(AGENT);
  sessionId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Notes' })).session_id;
  page = await newPage(browser, relay, PHONE);
  await signIn(page, relay, 'alice');
  await page.goto(`${relay.url}/#/s/${encodeURIComponent(sessionId)}`);
  await page.waitForSelector('.composer-input');
  await waitFor('the machine online', async () => /Online/.test(await page.innerText('.chat-subtitle')));
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error in any page');
});

// The timeline as a reader meets it, top to bottom: each item's kind and its words.
const items = () => page.$$eval('.timeline > *', (els) => els.map((el) => {
  if (el.classList.contains('msg')) return `${el.classList.contains('msg-user') ? 'you' : 'agent'}: ${el.querySelector('.msg-body').innerText.trim()}`;
  if (el.classList.contains('task')) return `task: ${el.innerText.replace(/\s+/g, ' ').trim()}`;
  if (el.classList.contains('approval')) return `approval: ${el.querySelector('.approval-title').innerText.trim()}`;
  return `other: ${el.className}`;
}));

async function shots(name) {
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    await screenshot(page, `order-360-${colorScheme}-${name}`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

test('text after a tool call and after an approval reads below them, live and after a reload', async () => {
  await page.fill('.composer-input', 'check the notes');
  await page.click('button[aria-label="Send"]');
  await page.waitForSelector('.timeline .approval-pending');
  await waitFor('the second line above the card', async () => (await items()).some((i) => i.startsWith('agent: The notes say')));
  let seen = await items();
  assert.equal(seen.length, 5, seen.join('\n'));
  assert.equal(seen[0], 'you: check the notes');
  assert.equal(seen[1], 'agent: First I read the notes.');
  assert.match(seen[2], /^task: READ read Done/);
  assert.equal(seen[3], 'agent: The notes say to run the checks.');
  assert.equal(seen[4], 'approval: Run make check');
  // The line above the card takes no more text (the next one goes below it): no typing dots while the card waits.
  assert.equal(await page.$$eval('.timeline .msg-agent', (els) => els.filter((e) => e.querySelector('.typing')).length), 0);
  await shots('approval');

  await page.click('.timeline .approval-pending button[data-choice="once"]');
  await waitFor('the words after the approval', async () => (await items()).includes(`agent: ${TOLD}`));
  seen = await items();
  assert.deepEqual(seen.slice(3), ['agent: The notes say to run the checks.', 'approval: Run make check', `agent: ${TOLD}`], seen.join('\n'));
  await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await shots('done');

  // Read back from the relay: the same order.
  await page.reload();
  await page.waitForSelector('.timeline .approval');
  await waitFor('the turn read back', async () => (await items()).includes(`agent: ${TOLD}`));
  assert.deepEqual(await items(), seen);
  problems.push(...page.problems);
});
