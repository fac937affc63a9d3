// Approve or deny from the notification (issue 40, item 1; docs/web.md
// "Approve or deny from the notification"): a real relayd, the real
// relay-bridge running examples/echo_agent.py, a local push service, and the
// web client in headless Chromium with its real service worker.
//
// Each approval travels as it would to a phone: the agent asks, relayd pushes
// (encrypted for the subscription) to the local push service, the test hands
// the decrypted payload to the service worker through the DevTools protocol
// (ServiceWorker.deliverPushMessage), and the worker shows its notification.
//
// How a tap is driven: headless Chromium shows no OS notification to click,
// and the DevTools protocol has no notificationclick. The test evaluates in
// the service worker's own global scope (Playwright's handle on the worker),
// takes the real Notification the worker showed from
// registration.getNotifications(), builds NotificationEvent('notificationclick',
// { notification, action }) and dispatches it to the worker's own listener.
// Only waitUntil is given to the event (a script-made event may not extend
// itself), so the test can wait for what the handler does; the handler, the
// Notification and everything it calls are the app's.
//
// The tests run in order and share one relay, one bridge and one account.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Relay, Bridge, BRIDGE, ECHO_AGENT, launch, screenshot, waitFor, sleep, PHONE, WAIT, verifyWithCode } from './lib.js';
import { PushService } from './push_service.js';

// A decision_sig made by no key the bridge knows.
const FORGED_SIG = 'H1i7jZB4Tv2bTAyOLx5A9DMV/YJvbrN9iJGAq/wsJek=';

let relay;
let browser;
let push;
let bridge;
let token;
let installationId;
let bridgeDevice;
let enrolCode; // the one-time code relay-bridge pair showed (issue 34)
let context;
let page;
let registration;
let cdp;
let plainId;
let sealedId;
let signedFirst; // the service worker's signed decision of the first encrypted approval
const workerPosts = []; // the decisions the service worker posted: { approvalId, body, status }
const problems = [];

class LoggedBridge extends Bridge {
  run(agent = ECHO_AGENT) {
    this.proc = spawn(BRIDGE, ['run', '--agent', agent], { env: this.env(), stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc.stderr.on('data', (c) => this.log.push(c.toString()));
    return this;
  }

  text() {
    return this.log.join('');
  }
}

const idOf = (d) => d.device_id || d.id;

async function history(sessionId) {
  return (await relay.api('GET', `/v1/me/sessions/${sessionId}/messages?limit=50`, token)).messages;
}

// The agent's replies in a plain chat, from relayd.
async function plainReplies(sessionId) {
  return (await history(sessionId)).filter((m) => m.role === 'agent' && m.state === 'final').map((m) => m.text || '');
}

const pageReplies = () => page.$$eval('.msg-agent.msg-final .msg-body', (els) => els.map((e) => e.innerText.trim()));

// The push relayd sent for the next approval of sessionId (after `seen` of them).
async function approvalPush(sessionId, seen) {
  return waitFor(`the approval push of ${sessionId}`, () => {
    const notes = push.messages('phone').filter((m) => m.kind === 'approval' && m.session_id === sessionId);
    return notes.length > seen ? notes[seen] : null;
  });
}

function worker() {
  const w = context.serviceWorkers().find((sw) => new URL(sw.url()).pathname === '/sw.js');
  assert.ok(w, 'the app\'s service worker runs');
  return w;
}

// What the worker posted for approvalId (the context reports a worker's request once it finished).
const postOf = (approvalId) => waitFor(`the worker's decision of ${approvalId}`, () => workerPosts.find((p) => p.approvalId === approvalId));

// The notifications the worker shows under tag, as the worker sees them.
const shown = (tag) => worker().evaluate(async (t) => (await self.registration.getNotifications({ tag: t }))
  .map((n) => ({ title: n.title, body: n.body, actions: n.actions.map((a) => a.action), data: n.data })), tag);

// Hands the push to the service worker and waits for its notification.
async function deliver(note) {
  let list = [];
  // A push delivered while the worker starts may be lost: deliver again (the same tag replaces it).
  for (let attempt = 0; attempt < 3 && !list.length; attempt++) {
    await cdp.send('ServiceWorker.deliverPushMessage', { origin: relay.url, registrationId: registration.registrationId, data: JSON.stringify(note) });
    list = await waitFor('the notification', async () => {
      const l = await shown(note.approval_id);
      return l.length ? l : null;
    }, attempt < 2 ? 5000 : WAIT).catch((err) => { if (attempt === 2) throw err; return []; });
  }
  assert.equal(list.length, 1);
  return list[0];
}

// A tap on action of the notification tagged tag, through the worker's own notificationclick listener
// (see the top of this file); resolves once the handler's work is done.
async function tap(tag, action) {
  const pagesBefore = context.pages().length;
  await worker().evaluate(async ({ t, a }) => {
    const [notification] = await self.registration.getNotifications({ tag: t });
    if (!notification) throw new Error(`no notification tagged ${t}`);
    const event = new NotificationEvent('notificationclick', { notification, action: a });
    const pending = [];
    Object.defineProperty(event, 'waitUntil', { value: (p) => pending.push(p) });
    self.dispatchEvent(event);
    await Promise.all(pending);
  }, { t: tag, a: action });
  assert.equal(context.pages().length, pagesBefore, 'the answer opened no window');
}

before(async () => {
  push = await new PushService().start();
  relay = await new Relay(['--push-endpoints', 'any', '--sse-heartbeat', '1s']).start();
  push.vapidKey = (await (await fetch(`${relay.url}/v1/web/config`)).json()).result.push.vapid_public_key;
  browser = await launch();
  token = relay.token('alice');
  bridge = new LoggedBridge(relay);
  const pairing = await bridge.startPairing('laptop');
  enrolCode = pairing.enrol_code;
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  installationId = await pairing.done;
  bridge.run(ECHO_AGENT);
  bridgeDevice = idOf(await waitFor('the bridge device key', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'bridge')));

  // The phone: notifications allowed, and the local push service's subscription in place of Google's (as web.test.js).
  const subscription = push.subscribe('phone');
  context = await browser.newContext({ viewport: PHONE, serviceWorkers: 'allow' });
  await context.grantPermissions(['notifications'], { origin: relay.url });
  await context.addInitScript((sub) => {
    let current = null;
    const fake = () => ({ endpoint: sub.endpoint, options: { applicationServerKey: window.__relayKey }, toJSON: () => sub,
      unsubscribe: async () => { current = null; return true; } });
    PushManager.prototype.subscribe = async function subscribe(options) {
      window.__relayKey = options.applicationServerKey;
      current = fake();
      return current;
    };
    PushManager.prototype.getSubscription = async function getSubscription() {
      return current;
    };
  }, subscription);
  // What the service worker posts (Playwright reports a worker's requests on the context).
  context.on('requestfinished', async (req) => {
    const path = new URL(req.url()).pathname;
    if (!req.serviceWorker() || req.method() !== 'POST' || !path.startsWith('/v1/me/approvals/')) return;
    const response = await req.response();
    workerPosts.push({ approvalId: decodeURIComponent(path.split('/').pop()), body: JSON.parse(req.postData()), status: response.status() });
  });
  page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (err) => page.problems.push(`pageerror: ${err.message}`));
  await page.goto(relay.loginLink('alice'));
  await page.waitForSelector('nav.tabs');
  await page.goto(`${relay.url}/#/settings`);
  await page.click('button:has-text("Turn on")');
  await page.waitForSelector('button:has-text("Turn off")');
  cdp = await context.newCDPSession(page);
  const registrations = [];
  cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => registrations.push(...e.registrations));
  await cdp.send('ServiceWorker.enable');
  registration = await waitFor('the worker registration', () => registrations.find((r) => r.scopeURL === `${relay.url}/`));
  await page.evaluate(async () => { await navigator.serviceWorker.ready; });
  await waitFor('the service worker handle', () => context.serviceWorkers().some((sw) => new URL(sw.url()).pathname === '/sw.js'));
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  if (push) await push.stop();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error in the page');
});

test('plain chat: Approve on the notification reaches the bridge and the agent runs the command; Deny likewise', async () => {
  plainId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Lock screen' })).session_id;

  await relay.api('POST', `/v1/me/sessions/${plainId}/send`, token, { text: 'run echo plainapple' });
  const note = await approvalPush(plainId, 0);
  assert.equal(note.installation_id, installationId, 'the push names the installation');
  assert.equal(note.severity, 'medium');
  const n = await deliver(note);
  assert.equal(n.title, 'Approval needed: Run a command');
  assert.equal(n.body, 'echo plainapple');
  assert.deepEqual(n.actions, ['approve', 'deny']);
  await tap(note.approval_id, 'approve');
  await waitFor('the agent running it', async () => (await plainReplies(plainId)).some((t) => t.startsWith('allow-once: ran `echo plainapple`')))
    .catch(async (err) => assert.fail(`${err.message}; posts: ${JSON.stringify(workerPosts)}; replies: ${JSON.stringify(await history(plainId))}; bridge: ${bridge.text().slice(-1500)}`));
  assert.deepEqual(await shown(note.approval_id), [], 'the notification is gone, and no follow-up: it went through');
  const post = await postOf(note.approval_id);
  assert.deepEqual(post.body, { decision: 'approve', installation_id: installationId });
  assert.equal(post.status, 200);

  await relay.api('POST', `/v1/me/sessions/${plainId}/send`, token, { text: 'run echo plainpear' });
  const denied = await approvalPush(plainId, 1);
  assert.deepEqual((await deliver(denied)).actions, ['approve', 'deny']);
  await tap(denied.approval_id, 'deny');
  await waitFor('the agent told no', async () => (await plainReplies(plainId)).includes('deny: `echo plainpear` was not run'));
  assert.deepEqual(await shown(denied.approval_id), []);
  collect();
});

test('an approval already decided, or expired, gets a follow-up notification that says so', async () => {
  // Approved elsewhere first (another device, the API): Deny from the notification changes nothing.
  await relay.api('POST', `/v1/me/sessions/${plainId}/send`, token, { text: 'run echo plainplum' });
  const note = await approvalPush(plainId, 2);
  await deliver(note);
  await relay.api('POST', `/v1/me/approvals/${note.approval_id}`, token, { decision: 'approve' });
  await tap(note.approval_id, 'deny');
  const [decided] = await shown(note.approval_id);
  assert.equal(decided.title, 'Already answered: Run a command');
  assert.equal(decided.body, 'It was approved before your answer: yours changed nothing.');
  assert.deepEqual(decided.actions, [], 'nothing more to answer');
  assert.equal(decided.data.url, `/#/s/${plainId}?at=${encodeURIComponent(`a:${note.approval_id}`)}`,
    'a tap opens the chat at the card');
  await waitFor('the first decision standing', async () => (await plainReplies(plainId)).some((t) => t.startsWith('allow-once: ran `echo plainplum`')));

  // Expired (a cancelled turn expires its approvals at once): Approve decides nothing.
  const sent = await relay.api('POST', `/v1/me/sessions/${plainId}/send`, token, { text: 'run echo plainkiwi' });
  const late = await approvalPush(plainId, 3);
  await deliver(late);
  await relay.api('POST', `/v1/me/sessions/${plainId}/cancel`, token, { interaction_id: sent.interaction_id });
  await tap(late.approval_id, 'approve');
  const [expired] = await shown(late.approval_id);
  assert.equal(expired.title, 'Expired: Run a command');
  assert.equal(expired.body, 'The request expired before your answer reached it: nothing was decided. The agent may ask again.');
  assert.equal((await postOf(late.approval_id)).status, 410);
  assert.ok(!(await plainReplies(plainId)).some((t) => t.includes('ran echo plainkiwi')), 'nothing ran');
  await page.goto(`${relay.url}/#/settings`);
  collect();
});

async function verifyMachine() {
  // This browser's device, verified on the machine with the code relay-bridge pair showed (as bridge_e2e.test.js).
  const web = await waitFor('the web device', async () => (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'web'));
  await waitFor('relay-bridge showing the device', () => bridge.text().includes(`device ${idOf(web)} (`));
  await verifyWithCode(page, relay, bridgeDevice, enrolCode);
  await waitFor('the bridge accepting the device', () => new RegExp(`device ${idOf(web)} \\([^)]*\\) accepted`).test(bridge.text()));
  return web;
}

test('encrypted chat: the notification reads the sealed request; Approve is signed in the worker and the bridge acts on it; Deny likewise', async () => {
  const web = await verifyMachine();
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await page.fill('#new-title', 'Sealed lock screen');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sealedId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  await waitFor('the bridge holding the key', () => bridge.text().includes(`session ${sealedId}: key received from device ${idOf(web)}`));
  const send = async (text) => {
    await page.fill('.composer-input', text);
    await page.click('button[aria-label="Send"]');
  };

  await send('run echo sealedfig');
  const note = await approvalPush(sealedId, 0);
  assert.equal(note.encrypted, true);
  assert.ok(note.details_ct && !JSON.stringify(note).includes('sealedfig'), 'the push carries the request sealed');
  const n = await deliver(note);
  assert.equal(n.title, 'Approval needed: Run a command', 'opened with the key in IndexedDB');
  assert.equal(n.body, 'echo sealedfig');
  assert.deepEqual(n.actions, ['approve', 'deny']);
  await tap(note.approval_id, 'approve');
  assert.deepEqual(await shown(note.approval_id), [], 'no follow-up: it went through');
  const post = await postOf(note.approval_id);
  assert.equal(post.status, 200);
  assert.equal(post.body.decision, 'approve');
  assert.equal(post.body.device_id, idOf(web));
  assert.match(post.body.decision_sig, /^[A-Za-z0-9+/]{43}=$/);
  signedFirst = post;
  await waitFor('the agent running it', async () => (await pageReplies()).some((t) => t.startsWith('allow-once: ran echo sealedfig')))
    .catch(async (err) => assert.fail(`${err.message}; bridge: ${bridge.text().slice(-1500)}`));
  assert.doesNotMatch(bridge.text(), /decision refused/, 'the bridge verified the worker\'s signature');

  await send('run echo sealeddate');
  const denied = await approvalPush(sealedId, 1);
  await deliver(denied);
  await tap(denied.approval_id, 'deny');
  const deny = await postOf(denied.approval_id);
  assert.equal(deny.body.decision, 'deny');
  assert.notEqual(deny.body.decision_sig, signedFirst.body.decision_sig);
  await waitFor('the agent told no', async () => (await pageReplies()).includes('deny: echo sealeddate was not run'));
  assert.doesNotMatch(bridge.text(), /decision refused/);
  await screenshot(page, 'phone-notify-decided-light');
  await page.emulateMedia({ colorScheme: 'dark' });
  await screenshot(page, 'phone-notify-decided-dark');
  await page.emulateMedia({ colorScheme: 'light' });
  collect();
});

test('encrypted chat: a forged decision and a replayed signature are refused by the bridge; the notification\'s own answer still decides', async () => {
  await page.fill('.composer-input', 'run echo sealedlime');
  await page.click('button[aria-label="Send"]');
  const note = await approvalPush(sealedId, 2);
  await deliver(note);
  const refused = `approval ${note.approval_id} in encrypted session ${sealedId}: decision refused, the agent is not told: decision_sig does not verify`;

  // The relay (or anyone with the token) makes a decision up: it cannot sign it.
  await relay.api('POST', `/v1/me/approvals/${note.approval_id}`, token,
    { decision: 'approve', device_id: signedFirst.body.device_id, decision_sig: FORGED_SIG });
  await waitFor('the bridge refusing the forgery', () => bridge.text().includes(refused));
  // The worker's real signature of the first approval, replayed on this one: it names another approval.
  const replay = await relay.api('POST', `/v1/me/approvals/${note.approval_id}`, token,
    { decision: 'approve', device_id: signedFirst.body.device_id, decision_sig: signedFirst.body.decision_sig });
  assert.equal(replay.forwarded, true);
  await waitFor('the bridge refusing the replay', () => bridge.text().split(refused).length - 1 >= 2);
  await sleep(1000);
  assert.ok(!(await pageReplies()).some((t) => t.includes('sealedlime')), 'the agent was told nothing');

  // The person's Deny from the notification: relayd had a decision first, so it passes this one on and says so;
  // the bridge acts on the first that verifies, this one.
  await tap(note.approval_id, 'deny');
  const [follow] = await shown(note.approval_id);
  assert.equal(follow.title, 'Already answered: Run a command');
  assert.equal(follow.body, 'Another answer reached the relay first. Yours went on to the machine, which keeps the first answer it can verify.');
  await waitFor('the agent told no', async () => (await pageReplies()).includes('deny: echo sealedlime was not run'));
  assert.equal(bridge.text().split(refused).length - 1, 2, 'the signed one verified');
  collect();
});

test('a high-severity request offers Deny and Open to approve, not Approve; a tap on the notification opens the chat', async () => {
  // The relay's push as it comes for a high-severity request (the echo agent asks at medium): the worker's
  // choice of actions depends only on what the push says.
  await relay.api('POST', `/v1/me/sessions/${plainId}/send`, token, { text: 'run echo plainfig' });
  const note = await approvalPush(plainId, 4);
  const n = await deliver({ ...note, severity: 'high' });
  assert.deepEqual(n.actions, ['deny', 'open']);
  await page.goto(`${relay.url}/#/settings`);
  await worker().evaluate(async (t) => {
    const [notification] = await self.registration.getNotifications({ tag: t });
    const event = new NotificationEvent('notificationclick', { notification, action: 'open' });
    const pending = [];
    Object.defineProperty(event, 'waitUntil', { value: (p) => pending.push(p) });
    self.dispatchEvent(event);
    // Focusing a window needs the person's own tap, which a script-made event is not: only the navigation is awaited.
    await Promise.allSettled(pending);
  }, note.approval_id);
  await page.waitForURL(new RegExp(`#/s/${plainId}$`));
  await page.waitForSelector('.approval-pending');
  assert.equal(workerPosts.filter((p) => p.approvalId === note.approval_id).length, 0, 'nothing was answered');
  await relay.api('POST', `/v1/me/approvals/${note.approval_id}`, token, { decision: 'deny' });
  collect();
});

test('signed out: the worker holds no token any more, and a tap on Approve asks to sign in instead of answering', async () => {
  await relay.api('POST', `/v1/me/sessions/${plainId}/send`, token, { text: 'run echo plainquince' });
  const note = await approvalPush(plainId, 5);
  await deliver(note);
  await page.goto(`${relay.url}/#/settings`);
  await page.click('button:has-text("Sign out")');
  await page.waitForSelector('nav.tabs', { state: 'detached' });
  // Signing out deletes the worker's copy of the token (handoff.js), as the worker reads it.
  await waitFor('the token gone from the worker\'s store', () => worker().evaluate(() => new Promise((resolve) => {
    const req = indexedDB.open('relay-worker', 1);
    req.onsuccess = () => {
      const get = req.result.transaction('auth', 'readonly').objectStore('auth').get('current');
      get.onsuccess = () => { req.result.close(); resolve(get.result === undefined); };
    };
  })));
  await tap(note.approval_id, 'approve');
  const [follow] = await shown(note.approval_id);
  assert.equal(follow.title, 'Sign in to answer: Run a command');
  assert.equal(follow.body, 'Relay is signed out on this device. Open it to sign in and answer.');
  await sleep(300);
  assert.equal(workerPosts.filter((p) => p.approvalId === note.approval_id).length, 0, 'nothing was posted');
  await relay.api('POST', `/v1/me/approvals/${note.approval_id}`, token, { decision: 'deny' });
  collect();
});

function collect() {
  problems.push(...page.problems);
  page.problems.length = 0;
}
