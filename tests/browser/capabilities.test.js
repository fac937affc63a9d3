// Device capability requests in the web client (ours, issue 28; docs/api.md
// "Device capabilities"): a real relay-bridge runs tests/e2e/capability_agent.py,
// which asks the phone for its location ("where ...") or a photo ("photo ...")
// and says what came back. The card shows the agent's reason; "Share location"
// then goes through the browser's own geolocation (Chromium's override: the
// context's geolocation and permission), "Take photo" through the camera's
// file input (the file chooser), "Refuse" refuses. A pending request comes
// back from the snapshot after a reload; an unanswered one expires
// (--capability-ttl 6s); another user never sees it; a location the browser may
// not give leaves the card to refuse.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, PHONE, ROOT } from './lib.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'e2e', 'capability_agent.py')}`;
const WHERE = { latitude: 48.8584, longitude: 2.2945, accuracy: 12 };
// A 1x1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');

let relay;
let browser;
let bridge;
let page;
let token;
let sessionId;
const problems = [];

before(async () => {
  relay = await new Relay(['--capability-ttl', '6s', '--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('phone-test');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  const installationId = await pairing.done;
  bridge.run(AGENT);
  sessionId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Where am I' })).session_id;
  page = await newPage(browser, relay, PHONE, { geolocation: WHERE, permissions: ['geolocation'] });
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

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

async function ask(text) {
  await page.fill('.composer-input', text);
  await page.click('button[aria-label="Send"]');
  const card = await waitFor('the capability card', () => page.$('.capability-pending'));
  assert.equal(await card.$eval('.capability-reason', (e) => e.textContent), `because you asked: ${text}`);
  return card;
}

async function reply(pattern) {
  return waitFor(`a reply matching ${pattern}`, async () =>
    (await page.$$eval('.msg-agent.msg-final .msg-body', (els) => els.map((e) => e.innerText.trim()))).find((t) => pattern.test(t)));
}

test('a location request: the reason, then the browser\'s location reaches the agent', async () => {
  const card = await ask('where am I?');
  assert.match(await card.innerText(), /Share your location\?/);
  assert.match(await card.innerText(), /Expires in 0:0\d/);
  assert.ok(await card.$('button[data-choice="refuse"]'));
  await screenshot(page, 'phone-capability-location');
  assert.deepEqual(await axe(page), []);
  await page.click('.capability-pending button[data-choice="share"]');
  const said = await reply(/answered: you are at/);
  assert.match(said, /^dcr_\w+ answered: you are at 48\.858, 2\.295 \(±12 m\)$/);
  // What the agent wrote before asking stays in its own message, the answer's text in one below it.
  const bodies = await page.$$eval('.timeline .msg-agent .msg-body', (els) => els.map((e) => e.innerText.trim()));
  assert.deepEqual(bodies.slice(-2), ['asking your phone...', said]);
  await page.waitForSelector('.capability-answered .approval-outcome:has-text("Location shared")');
  assert.equal((await relay.api('GET', '/v1/me/snapshot', token)).pending_capability_requests.length, 0);
  collect(page);
});

test('a photo request: the camera\'s file input, uploaded and handed to the agent', async () => {
  const card = await ask('photo of the shelf');
  assert.match(await card.innerText(), /Share a photo\?/);
  await screenshot(page, 'phone-capability-camera');
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), card.$('button[data-choice="share"]').then((b) => b.click())]);
  assert.equal(await chooser.element().getAttribute('capture'), 'environment');
  await chooser.setFiles({ name: 'shelf.png', mimeType: 'image/png', buffer: PNG });
  const said = await reply(/answered: a photo of/);
  assert.match(said, new RegExp(`answered: a photo of ${PNG.length} bytes \\(image/png\\) at http://127\\.0\\.0\\.1:\\d+/v1/files/att_\\w+$`));
  await page.waitForSelector('.capability-answered .approval-outcome:has-text("Photo shared")');
  collect(page);
});

test('a refusal reaches the agent', async () => {
  await ask('where now?');
  await page.click('.capability-pending button[data-choice="refuse"]');
  assert.match(await reply(/ refused$/), /^dcr_\w+ refused$/);
  await page.waitForSelector('.capability-refused .approval-outcome:has-text("Refused")');
  collect(page);
});

test('a pending request is back after a reload, never shown to another user, and expires', async () => {
  await ask('where later?');
  const pending = (await relay.api('GET', '/v1/me/snapshot', token)).pending_capability_requests;
  assert.equal(pending.length, 1);
  await page.reload();
  const card = await page.waitForSelector('.capability-pending');
  assert.equal(await card.$eval('.capability-reason', (e) => e.textContent), 'because you asked: where later?');

  // Another user: nothing in their snapshot or on their screen, and 404 on answering it.
  const other = await newPage(browser, relay, PHONE);
  await signIn(other, relay, 'mallory');
  const mallory = relay.token('mallory');
  assert.deepEqual((await relay.api('GET', '/v1/me/snapshot', mallory)).pending_capability_requests, []);
  await assert.rejects(relay.api('POST', `/v1/me/capabilities/${pending[0].request_id}`, mallory, { refused: true }),
    /404 .*capability_request_not_found/);
  assert.equal(await other.$('.capability'), null);
  collect(other);
  await other.context().close();

  // Nobody answers: the card says so and the agent hears it.
  await page.waitForSelector('.capability-expired .approval-outcome:has-text("Expired without an answer")', { timeout: 15000 });
  assert.match(await reply(/ expired$/), /^dcr_\w+ expired$/);
  await screenshot(page, 'phone-capability-expired');
  collect(page);
});

test('a location the browser is not allowed to give leaves the card to refuse', async () => {
  // A page without the geolocation permission: the browser says no, the user still decides.
  const denied = await newPage(browser, relay, PHONE, { geolocation: WHERE });
  await signIn(denied, relay, 'alice');
  await denied.goto(`${relay.url}/#/s/${encodeURIComponent(sessionId)}`);
  await denied.waitForSelector('.composer-input');
  await denied.fill('.composer-input', 'where else?');
  await denied.click('button[aria-label="Send"]');
  await denied.waitForSelector('.capability-pending');
  await denied.click('.capability-pending button[data-choice="share"]');
  await denied.waitForSelector('.toast:has-text("Location permission was not given")');
  assert.ok(await denied.$('.capability-pending'), 'the card stays');
  await denied.click('.capability-pending button[data-choice="refuse"]');
  await denied.waitForSelector('.capability-refused');
  collect(denied);
  await denied.context().close();
});
