// An encrypted chat shows what a plain one shows (issue 35, items 1 and 2).
//
// A real relayd, the real relay-bridge running tests/browser/cards_agent.py,
// and the page as the phone. The same agent turn (a plan, an edit with its
// arguments, progress and diff, an approval carrying the diff, a capability
// request, a failed read, a command's output) is played in a plain chat and
// in an encrypted one, where relay-bridge seals what it must and the page
// opens it. The two renderings are compared piece by piece: the approval
// card, the tool-call cards, the plan, the capability request, and the whole
// timeline again after a reload. Only the answers of the approval card
// differ, by design: the encrypted card has no "Always approve" and says why.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, ROOT, verifyWithCode } from './lib.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'browser', 'cards_agent.py')}`;
const PHONE_390 = { width: 390, height: 844 };
const PHONE_360 = { width: 360, height: 740 };
const LOCKED = 'Waiting for this device to receive the key';

let relay;
let browser;
let bridge;
let token;
let installationId;
let bridgeDevice;
let page;
let plainId;
let sealedId;
const problems = [];
const idOf = (d) => d.device_id || d.id;

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

// What a reader gets of each card under selector: its kind and state, its text (closed disclosures and
// screen-reader words included), its structure (every element's tag and classes, in order). Times and
// countdowns are left out, and so are the approval's answers and note, which are compared on their own.
const readCards = (p, selector) => p.$$eval(selector, (els) => els.map((el) => {
  const copy = el.cloneNode(true);
  for (const x of copy.querySelectorAll('.msg-meta, .countdown, .approval-actions, .approval-note')) x.remove();
  const classes = (e) => [...e.classList].sort().join('.');
  return {
    kind: classes(copy),
    label: copy.getAttribute('aria-label') || '',
    text: copy.textContent.replace(/\s+/g, ' ').trim(),
    shape: [...copy.querySelectorAll('*')].map((e) => `${e.tagName.toLowerCase()}.${classes(e)}`).join(' '),
  };
}));
const cards = (p) => readCards(p, '.timeline > *');
const trayCards = (p) => readCards(p, '.capability-tray .capability');
const answers = (p) => p.$$eval('.approval-pending .approval-actions button', (bs) => bs.map((b) => `${b.dataset.choice}: ${b.textContent}`));

async function openChat(id) {
  await page.goto(`${relay.url}/#/s/${id}`);
  await page.waitForSelector('.composer-input');
}

// The turn asked for and played up to the approval: every card of it drawn, the sealed ones opened.
async function playUntilApproval(id) {
  await openChat(id);
  const sent = () => page.$$eval('.timeline .msg-user', (els) => els.length);
  const before = await sent();
  await page.fill('.composer-input', 'cards');
  await page.click('button[aria-label="Send"]');
  try {
    // The message left this device (the outbox is empty, the timeline has it), then the turn plays.
    await waitFor('the message with the relay', async () => (await page.$$('.msg-outbox')).length === 0 && (await sent()) > before);
    await page.waitForSelector('.approval-pending .diff');
    await page.waitForSelector('.capability-pending');
    await waitFor('the running edit with its diff and the plan', async () =>
      (await page.$$('.task-kind-edit.task-running .diff')).length === 1 && (await page.$$('.task-plan.task-running .plan-entry')).length === 3);
    await waitFor('nothing locked', async () => !(await page.innerText('main')).includes(LOCKED));
  } catch (err) {
    // What each side had when the turn stopped short: a failure on a loaded machine names its cause.
    const history = await relay.api('GET', `/v1/me/sessions/${id}/messages?limit=100`, token).catch((e) => ({ error: e.message }));
    const timeline = await page.innerText('main').catch((e) => e.message);
    err.message += `\n--- page (${page.url()}): ${timeline.slice(-1500)}` +
      `\n--- messages: ${JSON.stringify((history.messages || []).map((m) => [m.role, m.status, m.interaction_id]))}` +
      `\n--- pending approvals: ${JSON.stringify((await relay.api('GET', '/v1/me/snapshot', token).catch((e) => ({ error: e.message }))))}`.slice(0, 2000) +
      `\n--- relay-bridge: ${bridge.log.join('').slice(-3000)}\n--- relayd: ${relay.log.join('').slice(-2000)}`;
    throw err;
  }
}

async function finishTurn() {
  await page.waitForSelector('.timeline .approval-pending');
  await page.click('.timeline .approval-pending button[data-choice="once"]');
  await page.click('.capability-pending button[data-choice="refuse"]');
  await waitFor('the end of the turn', async () => (await page.innerText('.timeline')).includes('Done: allow-once.'));
  await waitFor('every card final', async () => (await page.$$('.task-running')).length === 0 && (await page.$$('.task')).length === 4);
  await page.waitForSelector('.capability-refused');
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('build-box');
  const enrolCode = pairing.enrol_code;
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  installationId = await pairing.done;
  bridge.run(AGENT);
  bridgeDevice = idOf(await waitFor('the bridge device key', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'bridge')));
  page = await newPage(browser, relay, PHONE_390);
  await signIn(page, relay);
  // The plain chat first, made before the machine is verified; then the page verifies it and makes the encrypted one.
  plainId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Plain notes' })).session_id;
  const web = await waitFor('the web device', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'web'));
  await waitFor('relay-bridge showing the emoji', () => bridge.log.join('').includes(`device ${idOf(web)} (`));
  // The usual way (docs/bridge.md "Devices"): the one-time code relay-bridge pair showed, typed on the Verify screen.
  await verifyWithCode(page, relay, bridgeDevice, enrolCode);
  await waitFor('the bridge accepting the device', () => new RegExp(`device ${idOf(web)} .*shared the keys`).test(bridge.log.join('')));
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await page.fill('#new-title', 'Sealed notes');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sealedId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  assert.equal((await relay.api('GET', '/v1/me', token)).sessions.find((s) => s.id === sealedId).encrypted, true);
  await waitFor('the bridge holding the key', () => bridge.log.join('').includes(`session ${sealedId}: key received`));
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

const seen = {};

test('while the approval waits: the encrypted chat shows every card as the plain one does, diff included', async () => {
  await playUntilApproval(plainId);
  seen.plain = { cards: await cards(page), tray: await trayCards(page), answers: await answers(page) };
  await screenshot(page, 'cards-390-light-plain-approval');
  await playUntilApproval(sealedId);
  seen.sealed = { cards: await cards(page), tray: await trayCards(page), answers: await answers(page) };
  await screenshot(page, 'cards-390-light-sealed-approval');

  // What the plain chat shows is what the test means to compare: the diff, the arguments, the plan, the reason.
  const approval = seen.plain.cards.find((c) => c.kind.includes('approval-pending'));
  assert.ok(approval, 'a pending approval card');
  assert.match(approval.shape, /div\.diff /, 'the approval card carries the diff');
  assert.match(approval.text, /rewritten by the agent/);
  assert.match(seen.plain.cards.map((c) => c.text).join(' '), /Read the notes.*Rewrite line 6.*Run the checks/);
  assert.match(seen.plain.cards.map((c) => c.text).join(' '), /Writing line 6/);
  assert.match(seen.plain.cards.map((c) => c.text).join(' '), /file_path/);
  assert.match(seen.plain.tray.map((c) => c.text).join(' '), /to name the nearest office in the notes/);

  assert.deepEqual(seen.sealed.cards, seen.plain.cards, 'the same cards, text and structure');
  assert.deepEqual(seen.sealed.tray, seen.plain.tray, 'the same capability request');
  // The answers: four in the plain chat, the edit's grant named; three in the encrypted one, and the card says why.
  assert.deepEqual(seen.plain.answers, ['once: Approve once', 'session: Approve for this session',
    'always: Always approve edits to this file', 'deny: Deny']);
  assert.deepEqual(seen.sealed.answers, ['once: Approve once', 'session: Approve for this session', 'deny: Deny']);
  assert.match(await page.innerText('.approval-pending .approval-note'), /No “Always approve” in an encrypted chat/);
  // The path is said once, by the diff's head: not again in the sentence nor in a code box.
  assert.equal(await page.$('.approval-pending .approval-command'), null);
  assert.equal(await page.innerText('.approval-pending .approval-message'), 'The agent asks to edit:');
  assert.deepEqual(await axe(page), []);
  // The Approvals screen lists both requests (from the snapshot when it opens): the same card twice.
  await page.goto(`${relay.url}/#/approvals`);
  await waitFor('both pending requests listed with their diff', async () => (await page.$$('.approvals-list .approval-pending .diff')).length === 2);
  // Each card links to its chat, whose titles differ ("Open chat: Plain notes"): the rest must not.
  const listed = (await readCards(page, '.approvals-list .approval-pending')).map((c) => ({ ...c, text: c.text.replace(/Open chat: (Plain|Sealed) notes$/, '') }));
  assert.equal(listed.length, 2);
  assert.deepEqual(listed[0], listed[1], 'the plain and the encrypted request read the same on the Approvals screen');
  collect(page);
});

test('answered, finished, then reloaded: the two timelines read the same', async () => {
  await openChat(sealedId);
  await finishTurn();
  const sealedLive = await cards(page);
  await openChat(plainId);
  await finishTurn();
  const plainLive = await cards(page);
  assert.match(plainLive.map((c) => c.text).join(' '), /ENOENT: no such file docs\/missing\.md/);
  assert.match(plainLive.map((c) => c.text).join(' '), /bytes_written/);
  assert.match(plainLive.map((c) => c.text).join(' '), /all 12 checks passed/);
  assert.deepEqual(sealedLive, plainLive, 'the finished turn, card for card');

  const reread = async (id) => {
    await openChat(id);
    await page.reload();
    await waitFor('the timeline read again', async () => (await page.innerText('.timeline')).includes('Done: allow-once.') &&
      (await page.$$('.task')).length === 4 && (await page.$$('.timeline .approval')).length === 1);
    await waitFor('nothing locked', async () => !(await page.innerText('main')).includes(LOCKED));
    return cards(page);
  };
  const plainAfter = await reread(plainId);
  const sealedAfter = await reread(sealedId);
  assert.match(plainAfter.find((c) => c.kind.includes('approval')).shape, /div\.diff /, 'the answered approval keeps its diff');
  assert.deepEqual(sealedAfter, plainAfter, 'the timeline after a reload');
  collect(page);
});

test('screenshots of the cards at 360 and 390 px, light and dark', async () => {
  await playUntilApproval(sealedId);
  for (const [size, viewport] of [['390', PHONE_390], ['360', PHONE_360]]) {
    for (const scheme of ['light', 'dark']) {
      await page.setViewportSize(viewport);
      await page.emulateMedia({ colorScheme: scheme });
      const card = await page.$('.approval-pending');
      await card.scrollIntoViewIfNeeded();
      await screenshot(page, `cards-${size}-${scheme}-sealed-approval`);
      const edit = await page.$('.task-kind-edit');
      await edit.scrollIntoViewIfNeeded();
      await screenshot(page, `cards-${size}-${scheme}-sealed-edit`);
      // Nothing scrolls sideways, neither the page nor a diff: on a phone a long line of a diff wraps inside it.
      assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), true, `${size} ${scheme}`);
      assert.deepEqual(await page.$$eval('.diff-body', (els) => els.filter((e) => e.scrollWidth > e.clientWidth).length), 0, `${size} ${scheme}`);
    }
  }
  await page.emulateMedia({ colorScheme: 'light' });
  collect(page);
});
