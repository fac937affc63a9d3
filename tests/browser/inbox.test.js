// The inbox (issue 40, item 5; docs/web.md "Inbox"): a real relayd and two real
// relay-bridge machines, "laptop" and "desktop", each running the test agent
// (tests/browser/agent.py). With the page on the inbox, both machines ask for
// an approval, a reply finishes in a chat that is not open, and a turn fails
// with a failed tool call: each shows in the inbox as it happens, counted on
// the tab. After a reload they are all still there (from the snapshot and the
// chats' timelines). Tapping an entry opens its chat scrolled to its item,
// highlighted; a chat opened is read and leaves the inbox; an approval
// answered in the inbox leaves it, and the reply it brings arrives in it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, PHONE, ROOT } from './lib.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'browser', 'agent.py')}`;

let relay;
let browser;
let token;
let page;
const bridges = [];
const machines = {}; // name -> installation id
const chats = {}; // title -> session id
const problems = [];

async function pairMachine(name) {
  const bridge = new Bridge(relay);
  const pairing = await bridge.startPairing(name);
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  machines[name] = await pairing.done;
  bridge.run(AGENT);
  bridges.push(bridge);
}

async function newChat(machine, title) {
  chats[title] = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: machines[machine], title })).session_id;
}

const send = (title, text) => relay.api('POST', `/v1/me/sessions/${chats[title]}/send`, token, { text });

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

const badge = () => page.evaluate(() => {
  const b = document.getElementById('inbox-badge');
  return b.hidden ? 0 : Number(b.dataset.count);
});

const waitBadge = (n) => waitFor(`the tab counting ${n}`, async () => (await badge()) === n || null)
  .catch(async (err) => assert.fail(`${err.message}; badge ${await badge()}; main: ${await page.innerText('main')}`));

// The entries of a list of the inbox: kind, chat title, what happened, and the link.
const entries = (section) => page.$$eval(`#${section} + ul .inbox-link`, (links) => links.map((a) => ({
  kind: a.dataset.kind,
  title: a.querySelector('.session-title').textContent,
  what: a.querySelector('.inbox-what').textContent,
  href: a.getAttribute('href'),
})));

const inboxState = async () => ({
  approvals: (await page.$$eval('.approvals-list .approval-pending', (cards) => cards.map((c) => ({
    machine: c.querySelector('.approval-where').textContent,
    link: c.querySelector('.approval-session').textContent,
    command: c.querySelector('.approval-command').textContent,
  })))).sort((a, b) => a.machine.localeCompare(b.machine)),
  replies: await entries('inbox-replies'),
  failed: (await entries('inbox-failed')).sort((a, b) => a.kind.localeCompare(b.kind)),
});

// Opening an entry: the chat it names, scrolled to the item it names, highlighted.
async function opensAt(click, title, key) {
  await click();
  await page.waitForURL(`${relay.url}/#/s/${chats[title]}`);
  const item = await page.waitForSelector(`.timeline [data-key="${key}"].revealed`);
  const box = await item.boundingBox();
  const scroller = await (await page.$('.scroller')).boundingBox();
  assert.ok(box.y + box.height > scroller.y && box.y < scroller.y + scroller.height, `${key} is in view`);
  assert.equal(await page.innerText('.chat-title'), title);
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  await pairMachine('laptop');
  await pairMachine('desktop');
  await newChat('laptop', 'Alpha build');
  await newChat('desktop', 'Beta deploy');
  await newChat('laptop', 'Alpha notes');
  await newChat('desktop', 'Beta checks');
  await waitFor('both machines online', async () =>
    (await relay.api('GET', '/v1/me', token)).installations.every((i) => i.health === 'healthy'));
  page = await newPage(browser, relay, PHONE);
  await signIn(page, relay);
  await page.goto(`${relay.url}/#/inbox`);
  await page.waitForSelector('main h1:has-text("Inbox")');
  await page.waitForSelector('.inbox .empty:not([hidden])');
  assert.equal(await badge(), 0);
  assert.equal(await page.isVisible('button:has-text("Mark all as read")'), false, 'nothing to mark read');
});

after(async () => {
  for (const bridge of bridges) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error in any page');
});

test('approvals from both machines, a reply finished elsewhere and a failed turn arrive live, counted on the tab', async () => {
  await send('Alpha build', 'run make laptop-release');
  await send('Beta deploy', 'run deploy desktop-prod');
  await waitBadge(2);
  await page.waitForSelector('#inbox-waiting:has-text("Waiting for you (2)")');
  let state = await inboxState();
  assert.deepEqual(state.approvals, [
    { machine: 'desktop', link: 'Open chat: Beta deploy', command: 'deploy desktop-prod' },
    { machine: 'laptop', link: 'Open chat: Alpha build', command: 'make laptop-release' },
  ]);
  assert.match(await page.innerText('.tabs a[data-route="inbox"]'), /Inbox/);
  assert.match(await page.$eval('#inbox-badge .sr-only', (e) => e.textContent), /2 waiting for you/);

  await send('Alpha notes', 'the notes are ready');
  await waitBadge(3);
  await send('Beta checks', 'fail the checks');
  await waitBadge(5);
  state = await inboxState();
  assert.deepEqual(state.replies.map((e) => ({ kind: e.kind, title: e.title, what: e.what })),
    [{ kind: 'reply', title: 'Alpha notes', what: 'the notes are ready' }]);
  assert.deepEqual(state.failed.map((e) => ({ kind: e.kind, title: e.title, what: e.what })), [
    { kind: 'failed-task', title: 'Beta checks', what: 'Tool call failed: shell: make: *** [all] Error 2' },
    { kind: 'failed-turn', title: 'Beta checks', what: 'The agent failed: The build broke.' },
  ]);
  assert.match(await page.innerText('#inbox-replies'), /Finished while you were away \(1\)/);
  assert.match(await page.innerText('#inbox-failed'), /Failed \(2\)/);
  assert.match(await page.innerText('.inbox-link[data-kind="reply"] .session-sub'), /^laptop · /);
  await screenshot(page, 'phone-light-inbox');
  assert.deepEqual(await axe(page), []);
  await page.locator('#inbox-replies').scrollIntoViewIfNeeded();
  await screenshot(page, 'phone-light-inbox-lists');
  await page.emulateMedia({ colorScheme: 'dark' });
  await screenshot(page, 'phone-dark-inbox-lists');
  await page.evaluate(() => { document.getElementById('main').scrollTop = 0; });
  await screenshot(page, 'phone-dark-inbox');
  assert.deepEqual(await axe(page), []);
  await page.emulateMedia({ colorScheme: 'light' });
  collect(page);
});

test('after a reload everything is still there: the snapshot and the chats\' timelines', async () => {
  const was = await inboxState();
  await page.reload();
  await page.waitForSelector('main h1:has-text("Inbox")');
  await waitBadge(5);
  await waitFor('the same entries', async () => JSON.stringify(await inboxState()) === JSON.stringify(was) || null)
    .catch(async (err) => assert.fail(`${err.message}: ${JSON.stringify(await inboxState())} vs ${JSON.stringify(was)}`));
  collect(page);
});

test('each entry opens its chat at its item; a chat opened is read and leaves the inbox', async () => {
  const state = await inboxState();
  const reply = state.replies[0];
  const replyKey = decodeURIComponent(reply.href.split('?at=')[1]);
  assert.match(replyKey, /^m:/);
  await opensAt(() => page.click(`.inbox-link[href="${reply.href}"]`), 'Alpha notes', replyKey);
  assert.match(await page.innerText(`[data-key="${replyKey}"]`), /the notes are ready/);
  await page.click('.tabs a[data-route="inbox"]');
  await waitBadge(4);
  assert.deepEqual(await entries('inbox-replies'), []);

  const turn = state.failed.find((e) => e.kind === 'failed-turn');
  const turnKey = decodeURIComponent(turn.href.split('?at=')[1]);
  await opensAt(() => page.click(`.inbox-link[href="${turn.href}"]`), 'Beta checks', turnKey);
  assert.match(await page.innerText(`[data-key="${turnKey}"]`), /The build broke\.[\s\S]*ended: error/);
  await screenshot(page, 'phone-light-inbox-opened-at');
  await page.click('.tabs a[data-route="inbox"]');
  // Both failures were in that chat: read with it.
  await waitBadge(2);
  assert.deepEqual(await entries('inbox-failed'), []);

  const card = page.locator('.approvals-list .approval-pending', { hasText: 'deploy desktop-prod' });
  const approvalKey = await card.getAttribute('data-key');
  assert.match(approvalKey, /^a:/);
  await opensAt(() => card.locator('.approval-session').click(), 'Beta deploy', approvalKey);
  await page.goBack();
  await page.waitForSelector('main h1:has-text("Inbox")');
  // A pending approval stays until it is answered, read or not.
  await waitBadge(2);
  collect(page);
});

test('an approval answered in the inbox leaves it; the reply it brings arrives in it; Mark all as read', async () => {
  const card = page.locator('.approvals-list .approval-pending', { hasText: 'make laptop-release' });
  await card.locator('button[data-choice="once"]').click();
  // One approval left, and the agent's answer in Alpha build, which is not open, is a reply finished away.
  await waitFor('the reply to the approval', async () => (await entries('inbox-replies')).some((e) => e.title === 'Alpha build' && /decision: allow-once/.test(e.what)) || null)
    .catch(async (err) => assert.fail(`${err.message}; main: ${await page.innerText('main')}; messages: ${JSON.stringify((await relay.api('GET', `/v1/me/sessions/${chats['Alpha build']}/messages`, token)).messages.map((m) => [m.role, m.text, m.state, m.finish_reason]))}`));
  await waitBadge(2);
  assert.equal(await page.locator('.approvals-list .approval-pending').count(), 1);
  assert.match(await page.innerText('.inbox'), /Answered here/);
  await page.click('button:has-text("Mark all as read")');
  await waitBadge(1);
  assert.deepEqual(await entries('inbox-replies'), []);
  assert.equal(await page.isVisible('button:has-text("Mark all as read")'), false);
  // The read marks are this device's: a reload keeps them.
  await page.reload();
  await page.waitForSelector('.approvals-list .approval-pending');
  await waitBadge(1);
  assert.deepEqual(await entries('inbox-replies'), []);
  collect(page);
});
