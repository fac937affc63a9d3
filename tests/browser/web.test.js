// The web client in headless Chromium against a real relayd and a real
// relay-bridge (running tests/browser/agent.py) on loopback: sign-in by link,
// pairing, streaming chat, every approval choice, reload mid-reply, the
// offline banner, a relayd restart, Web Push through a local push service,
// screenshots at 360x740 and 1280x800, and axe-core's accessibility check.
// The tests run in order and share one relay, one bridge and one account.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, sleep, PHONE, DESKTOP, WAIT, ROOT } from './lib.js';
import { PushService } from './push_service.js';
import { OidcProvider } from './oidc_provider.js';

const AGENT = `jsonl:python3 ${join(ROOT, 'tests', 'browser', 'agent.py')}`;

let relay;
let browser;
let push;
let bridge;
let page;
let sessionId;
let installationId;
let token;
const problems = [];

before(async () => {
  push = await new PushService().start();
  // Short heartbeats so that a dead stream is noticed in seconds; plain-http push for the local service.
  relay = await new Relay(['--push-endpoints', 'any', '--sse-heartbeat', '1s', '--push-subject', 'mailto:ops@example.org']).start();
  push.vapidKey = (await (await fetch(`${relay.url}/v1/web/config`)).json()).result.push.vapid_public_key;
  browser = await launch();
  token = relay.token('alice');
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  if (push) await push.stop();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

async function composerSend(p, text) {
  await p.fill('.composer-input', text);
  await p.click('button[aria-label="Send"]');
}

async function lastAgentText(p) {
  return p.$$eval('.msg-agent .msg-body', (els) => (els.length ? els[els.length - 1].innerText.trim() : ''));
}

async function waitReply(p, expected) {
  await waitFor(`the reply "${expected}"`, async () =>
    (await p.$$eval('.msg-agent.msg-final .msg-body', (els) => els.map((e) => e.innerText.trim()))).includes(expected));
}

test('the app is served with a strict Content-Security-Policy, versioned and compressed', async () => {
  const r = await fetch(`${relay.url}/`, { headers: { 'Accept-Encoding': 'gzip' } });
  assert.equal(r.status, 200);
  const csp = r.headers.get('content-security-policy');
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  const html = await r.text();
  const version = /\/app\/([0-9a-f]{12})\/main\.js/.exec(html)[1];
  const asset = await fetch(`${relay.url}/app/${version}/main.js`);
  assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  const again = await fetch(`${relay.url}/`, { headers: { 'If-None-Match': r.headers.get('etag') } });
  assert.equal(again.status, 304);
});

test('a sign-in link signs in once, and the code leaves the address bar', async () => {
  const context = await browser.newContext({ viewport: PHONE });
  const login = await context.newPage();
  await login.goto(`${relay.url}/`);
  await login.waitForSelector('.login');
  await screenshot(login, 'phone-sign-in');
  assert.deepEqual(await axe(login), []);
  await context.close();

  page = await newPage(browser, relay, PHONE);
  const link = relay.loginLink('alice');
  assert.match(link, /\/login#code=[0-9A-Za-z]{32}$/);
  await page.goto(link);
  await page.waitForSelector('nav.tabs');
  assert.equal(new URL(page.url()).hash.includes('code='), false);
  assert.equal(page.url().includes('/login'), false);

  // The same link a second time: spent.
  const second = await newPage(browser, relay, PHONE);
  await second.goto(link);
  await second.waitForSelector('.login .notice');
  assert.match(await second.innerText('.login .notice'), /cannot be used/);
  collect(second);
  await second.context().close();
});

// The first load after sign-in (the device, /v1/me, the history) held at /v1/me: a screen opened meanwhile is
// drawn when the load is through, once. Drawn at once and then again by the load's end, it threw away what
// was typed on it (a code on Verify: the CI failure of agents.test.js).
test('a screen opened while the app is still loading is drawn once the load is through, not drawn and rebuilt', async () => {
  const p = await newPage(browser, relay, PHONE, { serviceWorkers: 'block' });
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  let asked;
  const askedForMe = new Promise((resolve) => { asked = resolve; });
  await p.route(/\/v1\/me$/, async (route) => {
    asked();
    await held;
    await route.continue();
  });
  await p.goto(relay.loginLink('alice'));
  await p.waitForSelector('nav.tabs');
  await askedForMe;
  // The app's hashchange listener runs before this one: what it drew is there when this one runs.
  const drawnWhileLoading = await p.evaluate(async () => {
    const changed = new Promise((resolve) => window.addEventListener('hashchange', resolve, { once: true }));
    location.hash = '#/settings';
    await changed;
    return document.body.dataset.route || null;
  });
  assert.equal(drawnWhileLoading, null, 'nothing is drawn over a load in progress');
  release();
  await p.waitForSelector('body[data-route="settings"] main h1');
  const mark = await p.evaluate(() => { document.querySelector('main h1').dataset.mark = 'first'; return document.body.dataset.route; });
  assert.equal(mark, 'settings', 'the screen opened during the load is the one drawn after it');
  await p.waitForSelector('body[data-connection="live"]', { state: 'attached' });
  assert.equal(await p.getAttribute('main h1', 'data-mark'), 'first', 'the screen was not rebuilt when the stream started');
  collect(p);
  await p.context().close();
});

test('a bridge pairs from the link its QR code carries', async () => {
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('laptop');
  assert.equal(pairing.claim_url, `${relay.url}/pair?code=${pairing.code}`);
  await page.goto(pairing.claim_url);
  await page.waitForSelector('#pair-code');
  assert.equal(await page.inputValue('#pair-code'), pairing.code);
  await screenshot(page, 'phone-pair');
  await page.click('form button[type="submit"]');
  await page.waitForSelector('.pair-result .success');
  // Paired: the emptied form is gone, the result and its next steps stay (issue 35, item 9).
  assert.equal(await page.isVisible('#pair-code'), false);
  assert.match(await page.innerText('.pair-result .success code'), /^relay-bridge run$/);
  assert.doesNotMatch(await page.innerText('.pair-result'), /null/);
  await screenshot(page, 'phone-paired');
  installationId = await pairing.done;
  bridge.run(AGENT);
  await page.goto(`${relay.url}/#/machines`);
  await page.waitForSelector('.installation .pill-healthy', { timeout: WAIT });
  await screenshot(page, 'phone-machines');
  collect(page);
});

test('a chat streams the reply as it arrives, and renders markdown without running any of it', async () => {
  await page.click('.installation a:has-text("New chat")');
  await page.fill('#new-title', 'Phone tour');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sessionId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  assert.match(sessionId, /^ses_/);

  await composerSend(page, 'slow 12');
  // Part of the reply is on screen while the rest is still coming.
  const partial = await waitFor('a partial reply', async () => {
    const text = await lastAgentText(page);
    return /word3/.test(text) && !/word12/.test(text) ? text : null;
  });
  assert.ok(await page.$('.msg-agent.msg-streaming'), `streaming bubble with "${partial}"`);
  await waitReply(page, Array.from({ length: 12 }, (_, i) => `word${i + 1}`).join(' '));

  await composerSend(page, 'markdown');
  await waitFor('the markdown reply', () => page.$('.msg-agent.msg-final h3'));
  const bubble = (await page.$$('.msg-agent.msg-final'))[1];
  assert.equal(await bubble.$eval('h3', (e) => e.textContent), 'Heading');
  assert.equal(await bubble.$eval('strong', (e) => e.textContent), 'bold');
  assert.equal(await bubble.$eval('a[href="https://example.org/docs"]', (e) => e.rel), 'noopener noreferrer nofollow');
  assert.equal(await bubble.$eval('pre code', (e) => e.textContent), 'print("hello")');
  // What looks like markup stays text; the javascript: link is not a link.
  assert.equal(await bubble.$$eval('script, img, iframe', (e) => e.length), 0);
  assert.equal(await bubble.$$eval('a[href^="javascript"]', (e) => e.length), 0);
  assert.match(await bubble.innerText(), /<script>alert\("not run"\)<\/script>/);
  await screenshot(page, 'phone-chat');
  await page.setViewportSize(DESKTOP);
  await screenshot(page, 'desktop-chat');
  assert.deepEqual(await axe(page), []);
  await page.setViewportSize(PHONE);
  collect(page);
});

test('attachments go up (a photo as from the camera) and show; a reply can be stopped', async () => {
  await page.setInputFiles('#attach-camera', join(ROOT, 'web', 'app', 'icon-192.png'));
  await page.setInputFiles('#attach-file', { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('some notes\n') });
  await page.waitForSelector('.chip-ready >> nth=1');
  await composerSend(page, 'two files');
  await waitReply(page, 'two files');
  const bubble = page.locator('.msg-user').last();
  const img = bubble.locator('.attachment-image img');
  await img.waitFor();
  assert.ok((await img.getAttribute('src')).startsWith(`${relay.url}/v1/files/`));
  assert.ok(await img.evaluate((e) => e.complete && e.naturalWidth === 192), 'the picture loads from its signed link');
  const file = bubble.locator('.attachment-file');
  assert.match(await file.innerText(), /notes\.txt \(11 B\)/);
  const download = await (await fetch(await file.getAttribute('href'))).text();
  assert.equal(download, 'some notes\n');
  await screenshot(page, 'phone-attachments');

  await composerSend(page, 'slow 60');
  await page.waitForSelector('button[aria-label="Stop the reply"]:not([hidden])');
  await waitFor('word3', async () => /word3\b/.test(await lastAgentText(page)));
  await page.click('button[aria-label="Stop the reply"]');
  // The bridge ends a cancelled turn with what was said so far and says so (docs/bridge.md).
  await waitFor('the stopped reply', async () => (await page.$$('.msg-agent.msg-streaming')).length === 0 &&
    /\[cancelled\]/.test(await lastAgentText(page)));
  assert.doesNotMatch(await lastAgentText(page), /word60/);
  await page.waitForSelector('button[aria-label="Stop the reply"]', { state: 'hidden' });
  collect(page);
});

async function approve(choice, command, expectedReply) {
  await composerSend(page, `run ${command}`);
  const card = await waitFor('the approval card', () => page.$('.approval-pending'));
  assert.match(await card.innerText(), new RegExp(command.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  assert.match(await card.innerText(), /Expires in \d:\d\d/);
  assert.match(await card.innerText(), /high risk/i);
  await (await card.$(`button[data-choice="${choice}"]`)).click();
  await waitReply(page, expectedReply);
}

test('each approval choice reaches the agent with the decision the spec maps it to', async () => {
  await composerSend(page, 'run echo shown');
  await waitFor('the approval card', () => page.$('.approval-pending'));
  await screenshot(page, 'phone-approval');
  await page.setViewportSize(DESKTOP);
  await screenshot(page, 'desktop-approval');
  assert.deepEqual(await axe(page), []);
  await page.setViewportSize(PHONE);
  await page.click('.approval-pending button[data-choice="deny"]');
  await waitReply(page, 'decision: deny');

  await approve('once', 'echo one', 'decision: allow-once');
  // The tool call shows as a card with its result.
  await waitFor('a finished tool call', () => page.$('.task-completed'));

  await approve('always', 'echo always', 'decision: allow-always');
  // The grant answers the same command from now on: no card, the agent gets allow-always at once.
  const cards = (await page.$$('.approval')).length;
  await composerSend(page, 'run echo always');
  await waitFor('the second allow-always', async () =>
    (await page.$$eval('.msg-agent.msg-final .msg-body', (els) => els.filter((e) => e.innerText.trim() === 'decision: allow-always').length)) === 2);
  assert.equal((await page.$$('.approval')).length, cards);

  await approve('session', 'echo session', 'decision: allow-once');
  // Later requests of this chat are answered by the app.
  await composerSend(page, 'run echo later');
  await waitFor('the automatic answer', async () =>
    (await page.$$eval('.approval-outcome', (els) => els.map((e) => e.textContent))).filter((t) => t === 'Approved for this session').length >= 2);
  await waitFor('the agent told', async () =>
    (await page.$$eval('.msg-agent.msg-final .msg-body', (els) => els.filter((e) => e.innerText.trim() === 'decision: allow-once').length)) === 3);
  collect(page);
});

test('the grant approve_always made is listed and revoked in Settings', async () => {
  await page.goto(`${relay.url}/#/settings`);
  const grant = await waitFor('the grant', () => page.$('.grant'));
  assert.match(await grant.innerText(), /exec: this command/);
  assert.match(await grant.innerText(), /echo always/);
  await screenshot(page, 'phone-settings');
  assert.deepEqual(await axe(page), []);
  await (await grant.$('button:has-text("Revoke")')).click();
  await waitFor('the empty list', async () => (await page.$$('.grant')).length === 0);
  const listed = await relay.api('GET', '/v1/me/grants', token);
  assert.deepEqual(listed.grants, []);
  collect(page);
});

test('a reload in the middle of a reply resumes it', async () => {
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.waitForSelector('.composer-input');
  const before = (await page.$$('.msg-agent')).length;
  await composerSend(page, 'slow 40');
  await waitFor('word5', async () => /word5\b/.test(await lastAgentText(page)) && (await page.$$('.msg-agent')).length > before);
  await page.reload();
  await page.waitForSelector('.composer-input');
  // The reply is there at once, still coming, then whole.
  const midway = await waitFor('the reply after the reload', async () => {
    const text = await lastAgentText(page);
    return /word\d+/.test(text) && !/word40\b/.test(text) ? text : null;
  });
  assert.ok(midway.startsWith('word1 word2'), midway);
  await waitReply(page, Array.from({ length: 40 }, (_, i) => `word${i + 1}`).join(' '));
  collect(page);
});

test('offline, the banner says so; back online, the chat goes on', async () => {
  await page.context().setOffline(true);
  await page.waitForSelector('#banner:not([hidden])');
  assert.match(await page.innerText('#banner'), /offline/i);
  await screenshot(page, 'phone-offline');
  await page.context().setOffline(false);
  await page.waitForSelector('#banner', { state: 'hidden', timeout: WAIT });
  await composerSend(page, 'back online');
  await waitReply(page, 'back online');
  collect(page);
});

test('a relayd restart: the client reconnects by itself', async () => {
  const code = await relay.stop();
  assert.equal(code, 0);
  await page.waitForSelector('#banner:not([hidden])', { timeout: WAIT });
  await relay.start();
  await page.waitForSelector('#banner', { state: 'hidden', timeout: 2 * WAIT });
  // The bridge reconnects too (its own backoff); then the chat works as before.
  await waitFor('the agent online again', async () =>
    (await relay.api('GET', '/v1/me', token)).installations[0].health === 'healthy', 2 * WAIT);
  await composerSend(page, 'after the restart');
  await waitReply(page, 'after the restart');
  collect(page);
});

test('push: an approval request with no stream open reaches the device, and opens the chat', async () => {
  const subscription = push.subscribe('phone');
  const context = await browser.newContext({ viewport: PHONE, serviceWorkers: 'allow' });
  await context.grantPermissions(['notifications'], { origin: relay.url });
  // Chromium's own push service is on the internet; the page gets the local service's subscription instead,
  // and the test checks that the app asked for it with the relay's key.
  await context.addInitScript((sub) => {
    let current = null;
    const fake = () => ({
      endpoint: sub.endpoint,
      options: { applicationServerKey: window.__relayKey },
      toJSON: () => sub,
      unsubscribe: async () => { current = null; return true; },
    });
    PushManager.prototype.subscribe = async function subscribe(options) {
      window.__relayKey = options.applicationServerKey;
      current = fake();
      return current;
    };
    PushManager.prototype.getSubscription = async function getSubscription() {
      return current;
    };
  }, subscription);
  const phone = await context.newPage();
  phone.problems = [];
  phone.on('pageerror', (err) => phone.problems.push(`pageerror: ${err.message}`));
  await phone.goto(relay.loginLink('alice'));
  await phone.waitForSelector('nav.tabs');
  await phone.goto(`${relay.url}/#/settings`);
  await phone.click('button:has-text("Turn on")');
  await phone.waitForSelector('button:has-text("Turn off")');
  const key = await phone.evaluate(() => Array.from(new Uint8Array(window.__relayKey)));
  assert.equal(Buffer.from(key).toString('base64url'), push.vapidKey);

  // No stream open: every page of the account is closed.
  await phone.close();
  await page.close();
  await waitFor('no stream open', async () => true);
  await sleep(300);

  await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, token, { text: 'run uptime' });
  const note = await waitFor('the approval push', () => push.messages('phone').find((m) => m.kind === 'approval'));
  assert.deepEqual(push.failures, []);
  assert.equal(note.title, 'Run a command');
  assert.equal(note.body, 'uptime');
  assert.equal(note.session_id, sessionId);
  assert.equal(note.severity, 'high');
  assert.equal(note.url, `/#/s/${sessionId}`);
  assert.equal(note.urgency, 'high');
  assert.ok(note.ttl > 0 && note.ttl <= 300, `TTL ${note.ttl}`);
  const request = push.byName('phone').requests[0];
  assert.equal(request.vapid.sub, 'mailto:ops@example.org');

  // The notification the service worker shows for it.
  const device = await context.newPage();
  await device.goto(`${relay.url}/#/approvals`);
  await device.waitForSelector('.approval-pending');
  const cdp = await context.newCDPSession(device);
  const registrations = [];
  cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => registrations.push(...e.registrations));
  await cdp.send('ServiceWorker.enable');
  const registration = await waitFor('the worker registration', () => registrations.find((r) => r.scopeURL === `${relay.url}/`));
  // A push delivered before the worker is active is lost: wait for it, and deliver again (the same tag
  // replaces the notification) should none show within a few seconds.
  await device.evaluate(async () => { await navigator.serviceWorker.ready; });
  let shown = null;
  for (let attempt = 0; attempt < 3 && !shown; attempt++) {
    await cdp.send('ServiceWorker.deliverPushMessage', { origin: relay.url, registrationId: registration.registrationId, data: JSON.stringify(note) });
    shown = await waitFor('the notification', async () => {
      const list = await device.evaluate(async () => (await (await navigator.serviceWorker.ready).getNotifications())
        .map((n) => ({ title: n.title, body: n.body, url: n.data && n.data.url })));
      return list.length ? list : null;
    }, attempt < 2 ? 5000 : undefined).catch((err) => { if (attempt === 2) throw err; return null; });
  }
  assert.deepEqual(shown[0], { title: 'Approval needed: Run a command', body: 'uptime', url: `/#/s/${sessionId}` });
  await screenshot(device, 'phone-approvals');
  assert.deepEqual(await axe(device), []);
  await device.click('.approval-pending button[data-choice="once"]');
  await device.waitForSelector('.approval-outcome');

  // A reply that finishes while no stream is open is pushed too.
  await device.close();
  await sleep(300);
  await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, token, { text: 'done while away' });
  const reply = await waitFor('the reply push', () => push.messages('phone').find((m) => m.kind === 'reply' && m.body === 'done while away'));
  assert.equal(reply.session_id, sessionId);
  assert.equal(reply.urgency, 'normal');

  // A push service that says the subscription is gone: relayd forgets it and sends no more.
  push.answer('phone', 410);
  const sent = push.byName('phone').requests.length;
  await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, token, { text: 'first after gone' });
  await waitFor('the 410', () => push.byName('phone').requests.length === sent + 1);
  await sleep(500);
  await relay.api('POST', `/v1/me/sessions/${sessionId}/send`, token, { text: 'second after gone' });
  await waitFor('the reply', async () => {
    const history = await relay.api('GET', `/v1/me/sessions/${sessionId}/messages?limit=1`, token);
    return history.messages[0].text === 'second after gone' && history.messages[0].state === 'final';
  });
  await sleep(500);
  assert.equal(push.byName('phone').requests.length, sent + 1);
  await context.close();
});

test('push: a browser push service that cannot be reached: after 10 s a message says so and Turn on works again (issue 35)', async () => {
  const subscription = push.subscribe('unreachable');
  const context = await browser.newContext({ viewport: PHONE, serviceWorkers: 'allow' });
  await context.grantPermissions(['notifications'], { origin: relay.url });
  // The browser's push service (Google's, for Chromium) unreachable: subscribe answers nothing, as Chrome's
  // does for a long time without a network path to it; then reachable again, the local service's subscription.
  await context.addInitScript((sub) => {
    let current = null;
    PushManager.prototype.subscribe = function subscribe() {
      if (!window.__pushReachable) return new Promise(() => {});
      current = { endpoint: sub.endpoint, options: {}, toJSON: () => sub, unsubscribe: async () => { current = null; return true; } };
      return Promise.resolve(current);
    };
    PushManager.prototype.getSubscription = async function getSubscription() {
      return current;
    };
  }, subscription);
  const p = await context.newPage();
  p.problems = [];
  p.on('pageerror', (err) => p.problems.push(`pageerror: ${err.message}`));
  await p.goto(relay.loginLink('alice'));
  await p.waitForSelector('nav.tabs');
  await p.goto(`${relay.url}/#/settings`);
  const started = Date.now();
  await p.click('button:has-text("Turn on")');
  // While it waits, the button says so and cannot be pressed twice.
  const busy = await p.waitForSelector('.setting button:has-text("Turning on…")');
  assert.equal(await busy.isDisabled(), true);
  const failure = await p.waitForSelector('.push-failure', { timeout: 14000 });
  const waited = Date.now() - started;
  assert.ok(waited >= 9500 && waited < 14000, `the message after ${waited} ms`);
  assert.match(await failure.innerText(), /The browser's push service did not answer within 10 s\. Notifications stay off/);
  assert.equal(await failure.getAttribute('role'), 'alert');
  const again = await p.waitForSelector('.setting button:has-text("Turn on")');
  assert.equal(await again.isDisabled(), false, 'the button is usable again');
  assert.match(await p.innerText('.push-status'), /Off for this device/);
  await (await p.$('#set-notify')).scrollIntoViewIfNeeded();
  for (const viewport of [PHONE, { width: 390, height: 844 }]) {
    for (const colorScheme of ['light', 'dark']) {
      await p.setViewportSize(viewport);
      await p.emulateMedia({ colorScheme });
      await screenshot(p, `push-unreachable-${viewport.width}-${colorScheme}`);
    }
  }
  assert.deepEqual(await axe(p), []);
  // Reachable again: the same button turns notifications on, and the message goes.
  await p.evaluate(() => { window.__pushReachable = true; });
  await again.click();
  await p.waitForSelector('.setting button:has-text("Turn off")');
  assert.equal(await p.$('.push-failure'), null);
  collect(p);
  await p.evaluate(() => localStorage.removeItem('relay.push'));
  await context.close();
});

test('with an OpenID Connect provider: sign-in with PKCE, and a refresh before the token lapses', async () => {
  const provider = await new OidcProvider({ clientId: 'relay-web', audience: 'relay-api', lifetimeS: 65 }).start();
  const other = await new Relay(['--jwks-url', `${provider.issuer}/jwks`, '--jwt-issuer', provider.issuer,
    '--jwt-audience', 'relay-web', '--oidc-client-id', 'relay-web']).start();
  try {
    const p = await newPage(browser, other, PHONE);
    await p.goto(`${other.url}/`);
    await p.click('.login button:has-text("Sign in")');
    await p.waitForSelector('nav.tabs', { timeout: WAIT });
    assert.equal(new URL(p.url()).search, '', 'the code and state leave the address bar');
    const stored = await p.evaluate(() => JSON.parse(localStorage.getItem('relay.auth')));
    assert.equal(stored.mode, 'oidc');
    assert.equal(stored.user_id, 'alice-oidc');
    assert.ok(stored.refresh_token);
    await p.goto(`${other.url}/#/settings`);
    await p.waitForSelector('text=Signed in as alice-oidc');
    assert.deepEqual(provider.grants, ['authorization_code']);
    // Within a minute of its expiry the token is refreshed before the next call.
    await sleep(5500);
    await p.goto(`${other.url}/#/machines`);
    await p.goto(`${other.url}/#/settings`);
    await waitFor('a refresh', () => provider.grants.includes('refresh_token'));
    await p.waitForSelector('.settings-section');
    assert.deepEqual(provider.errors, []);
    collect(p);
    await p.context().close();
  } finally {
    assert.equal(await other.close(), 0);
    await provider.stop();
  }
});

test('every main screen at phone and desktop size, light and dark, passes axe', async () => {
  for (const [size, viewport] of [['phone', PHONE], ['desktop', DESKTOP]]) {
    for (const scheme of ['light', 'dark']) {
      const p = await newPage(browser, relay, viewport, { colorScheme: scheme });
      await signIn(p, relay);
      for (const [name, hash] of [['chats', '#/'], ['chat', `#/s/${sessionId}`], ['machines', '#/machines'], ['pair', '#/pair'],
        ['approvals', '#/approvals'], ['settings', '#/settings'], ['new-chat', '#/new']]) {
        await p.goto(`${relay.url}/${hash}`);
        await p.waitForSelector('main h1, main .chat-title');
        await sleep(150);
        await screenshot(p, `${size}-${scheme}-${name}`);
        assert.deepEqual((await axe(p)).map((v) => `${size} ${scheme} ${name}: ${v}`), []);
      }
      collect(p);
      await p.context().close();
    }
  }
});
