// End-to-end encryption in the web client (issue 26; docs/web.md "End-to-end
// encryption"), in headless Chromium against a real relayd.
//
// The test plays the bridge itself, on relayd's bridge REST routes and its
// WebSocket, with its own implementation of the wire: Node's HKDF, AES-GCM
// and HMAC, and tweetnacl from npm for crypto_box_beforenm (the page uses the
// vendored copy of the same version, and crypto.js; nothing of the page's code
// is reused here). The tests run in order and share one relay, one account,
// one installation and one encrypted chat.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import nacl from 'tweetnacl';
import { Relay, launch, newPage, signIn, screenshot, axe, waitFor, sleep, WAIT, ROOT, filesUnder } from './lib.js';
import { BridgeSocket } from './bridge_socket.js';

const PHONE_390 = { width: 390, height: 844 };
// Words that must never reach relayd in clear: each is sent or shown only sealed.
const SECRET = {
  title: 'Quarterly tangerine audit',
  user: 'Please count the marmalade invoices',
  reply: 'Seventeen marmalade invoices, all paid',
  delta: ['Seventeen marmalade ', 'invoices, ', 'all paid'],
  task: 'Reading ledger-of-tangerines.csv',
  args: '/srv/books/ledger-of-tangerines.csv',
  result: 'the tangerine ledger holds 3 lines',
  approval: 'shred-the-marmalade --verbose',
  rotated: 'After the rotation: persimmon',
  push: 'A pushed kumquat reply',
  reason: 'to find the nearest quince orchard',
  ask: 'Where is the nearest quince orchard?',
  file: 'quince-orchard-survey.txt',
  fileText: 'The quince orchard survey: eleven gnarled trees\n',
  place: '51.47792812345',
  inbox: 'A persimmon reply read in the inbox',
  inboxError: 'the fig ledger is unreadable',
  // The machine's one-time codes (issue 34): out of band, never through relayd.
  code: 'K7QW-M3ZP-TR8N-HX2C-V9YB',
  linkCode: 'PQ4R-S5T6-UV7W-XY8Z-AB9C',
  pairCode: 'HJ2K-LM3N-PQ4R-ST5U-VW6X',
};
// Where the browser says it is (Chromium's override), and which digits of it must never travel in clear.
const WHERE = { latitude: 51.47792812345, longitude: -0.001545, accuracy: 9 };
// The protocol authors' SAS table (their sas-emojis.ts), interop data.
const SAS_EMOJI = ['🐱', '🐶', '🐭', '🐹', '🐰', '🐻', '🐼', '🐨', '🐯', '🦁', '🐮', '🐷', '🐸', '🦊', '🐔', '🐺',
  '🍎', '🍌', '🍇', '🍓', '🍑', '🍒', '🥕', '🌽', '🌙', '⭐', '🌈', '🔥', '⚡', '🚀', '⚓', '🎁'];

let relay;
let browser;
let token;
let bridgeToken;
let installationId;
let socket;
let page;
let sessionId;
let sessionKey;
let oldKey;
let webDevice;
let bridgeDevice;
let interactionId;
let waitingSession; // a chat made while the machine waited for its owner (issue 34)
const bridgeKeys = nacl.box.keyPair();
const sent = []; // every request body the pages sent to /v1/
const problems = [];

// ---- the bridge's side of the wire, written from the contract ----
const hkdf = (ikm, info, n) => new Uint8Array(hkdfSync('sha256', ikm, Buffer.alloc(0), Buffer.from(info, 'utf8'), n));
const hex = (b) => Buffer.from(b).toString('hex');
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'));
// The bridge's check of a grant the web device made (docs/api.md, "Signed grants"), from the bridge's side.
const grantSigOf = (p, devicePub) => createHmac('sha256', Buffer.from(hkdf(nacl.box.before(unhex(devicePub), bridgeKeys.secretKey), 'relay/v1/grant', 32)))
  .update(Buffer.concat(['relay/v1/grant', p.session_id, p.wrapped_session_key, p.wrapped_by_device_id].map((x, i) => Buffer.concat([Buffer.from(i ? [0xff] : []), Buffer.from(x, 'utf8')]))))
  .digest('base64');

function sealBytes(key, plain) {
  if (!plain.length) return Buffer.from([0]);
  const nonce = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, nonce);
  const body = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([Buffer.from([1]), nonce, body, c.getAuthTag()]);
}

function openBytes(key, env) {
  if (env.length === 1 && env[0] === 0) return Buffer.alloc(0);
  assert.equal(env[0], 1, 'a v1 envelope');
  const d = createDecipheriv('aes-256-gcm', key, env.subarray(1, 13));
  d.setAuthTag(env.subarray(env.length - 16));
  return Buffer.concat([d.update(env.subarray(13, env.length - 16)), d.final()]);
}

const seal = (key, path, text) => sealBytes(hkdf(key, `sophon/v1/blob/${path}`, 32), Buffer.from(text, 'utf8')).toString('base64');
const open = (key, path, b64) => openBytes(hkdf(key, `sophon/v1/blob/${path}`, 32), Buffer.from(b64, 'base64')).toString('utf8');

function unwrap(b64, secret) {
  const env = new Uint8Array(Buffer.from(b64, 'base64'));
  assert.equal(env[0], 2, 'a sealed box');
  const key = hkdf(nacl.box.before(env.subarray(1, 33), secret), 'sophon/v1/sealed-box', 32);
  return new Uint8Array(openBytes(key, Buffer.from(env.subarray(33))));
}

function wrap(sessionKeyBytes, pubHex) {
  const eph = nacl.box.keyPair();
  const key = hkdf(nacl.box.before(unhex(pubHex), eph.secretKey), 'sophon/v1/sealed-box', 32);
  return Buffer.concat([Buffer.from([2]), Buffer.from(eph.publicKey), sealBytes(key, Buffer.from(sessionKeyBytes))]).toString('base64');
}

// The contract's enrol_proof (issue 34), as relay-bridge checks it.
const enrolProofOf = (code, bridgeId, deviceId, pubHex) => createHmac('sha256',
  Buffer.from(hkdfSync('sha256', Buffer.from(code.replace(/-/g, ''), 'ascii'), Buffer.alloc(0), Buffer.from('relay/v1/enrol'), 32)))
  .update(Buffer.concat([Buffer.from('relay/v1/enrol'), ...[bridgeId, deviceId, pubHex].flatMap((x) => [Buffer.from([0xff]), Buffer.from(x)])]))
  .digest('base64');

// The screen at both phone widths, light and dark: nothing scrolls sideways.
// The device's row brought into view for a screenshot. Settings draws its list again whenever a device's
// state changes (the bridge sharing its keys a moment after a confirmation), which detaches the row an
// element handle or a locator's scroll was holding: the scroll is done in the page, in one step.
async function scrollToDevice(p, deviceId) {
  const found = await p.evaluate((id) => {
    const row = document.querySelector(`.device-item[data-device="${id}"]`);
    if (row) row.scrollIntoView({ block: 'nearest' });
    return !!row;
  }, deviceId);
  assert.ok(found, `the row of ${deviceId} in Settings`);
}

async function shots(p, name) {
  const size = p.viewportSize();
  for (const viewport of [{ width: 360, height: 740 }, PHONE_390]) {
    for (const colorScheme of ['light', 'dark']) {
      await p.setViewportSize(viewport);
      await p.emulateMedia({ colorScheme });
      await screenshot(p, `${name}-${viewport.width}-${colorScheme}`);
      assert.ok(await p.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), `${name} scrolls sideways at ${viewport.width}`);
    }
  }
  await p.emulateMedia({ colorScheme: 'light' });
  await p.setViewportSize(size);
}

// The grants of waitingSession's key to the bridge, oldest first.
const waitingGrants = () => socket.updates('session_key_granted').filter((u) => u.payload.session_id === waitingSession && u.payload.device_id === bridgeDevice);

// The confirmations the pages posted, parsed.
const confirms = () => sent.filter((r) => /^POST \S+\/v1\/me\/devices\/[^/]+\/confirm /.test(r)).map((r) => JSON.parse(r.slice(r.indexOf(' {') + 1)));

const sasOf = (pubHex) => [...hkdf(nacl.box.before(unhex(pubHex), bridgeKeys.secretKey), 'sophon/v1/sas', 4)].map((b) => SAS_EMOJI[b % 32]).join(' ');

function expectedSig(devicePubHex, { approvalId, decision, scope, deviceId }) {
  const k = hkdf(nacl.box.before(unhex(devicePubHex), bridgeKeys.secretKey), 'relay/v1/decision', 32);
  const sep = Buffer.from([0xff]);
  const parts = ['relay/v1/decision', approvalId, sessionId, decision, scope || '', deviceId].map((p) => Buffer.from(p, 'utf8'));
  return createHmac('sha256', k).update(Buffer.concat(parts.flatMap((p, i) => (i ? [sep, p] : [p])))).digest('base64');
}

// ---- calls ----
async function call(method, path, auth, body, headers = {}) {
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(`${relay.url}${path}`, {
      method,
      headers: { ...(auth ? { Authorization: `Bearer ${auth}` } : {}), 'Content-Type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await r.json();
    if (r.status === 429 && attempt < 20) {
      await sleep(500);
      continue;
    }
    if (!json.ok) {
      const err = new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json.error)}`);
      err.status = r.status;
      throw err;
    }
    return json.result;
  }
}

const me = (method, path, body, headers) => call(method, path, token, body, headers);
const bridge = (route, body) => call('POST', `/v1/bridge/${route}`, bridgeToken, body);
const idOf = (d) => d.device_id || d.id;
let keys = 0;
const key = () => `k${Date.now()}-${keys++}`;

function watch(p) {
  p.on('request', (req) => {
    if (new URL(req.url()).pathname.startsWith('/v1/')) sent.push(`${req.method()} ${req.url()} ${req.postData() || ''}`);
  });
  return p;
}

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

const lastAgentText = (p) => p.$$eval('.msg-agent .msg-body', (els) => (els.length ? els[els.length - 1].innerText.trim() : ''));

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  const start = await call('POST', '/v1/pairing/start', '', { connector_type: 'acp', host_label: 'laptop' });
  await me('POST', '/v1/me/pairing/claim', { code: start.code });
  const paired = await call('POST', '/v1/pairing/poll', '', { poll_token: start.poll_token });
  bridgeToken = paired.token;
  installationId = paired.installation_id;
  socket = await new BridgeSocket(relay.url, bridgeToken).open();
  const registered = await bridge('devices', { pubkey: hex(bridgeKeys.publicKey), label: 'laptop bridge' });
  bridgeDevice = registered.device_id;
  assert.match(bridgeDevice, /^dev_/);
});

after(async () => {
  if (socket) socket.close();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

test('the browser registers its device: a public key only, and the bridge hears of it', async () => {
  page = watch(await newPage(browser, relay, PHONE_390));
  await signIn(page, relay);
  webDevice = await waitFor('the web device', async () => (await me('GET', '/v1/me/devices')).devices.find((d) => d.platform === 'web'));
  assert.match(webDevice.pubkey, /^[0-9a-f]{64}$/);
  // The secret stays in IndexedDB: what the browser holds derives the public key the relay has.
  const held = await page.evaluate(() => new Promise((resolve, reject) => {
    const req = indexedDB.open('relay-e2e');
    req.onsuccess = () => {
      const all = req.result.transaction('devices').objectStore('devices').getAll();
      all.onsuccess = () => resolve(all.result.map((d) => ({ id: d.device_id, pub: d.public_key, secret: Array.from(d.secret_key) })));
    };
    req.onerror = () => reject(req.error);
  }));
  assert.equal(held.length, 1);
  assert.equal(held[0].id, idOf(webDevice));
  assert.equal(hex(nacl.box.keyPair.fromSecretKey(Uint8Array.from(held[0].secret)).publicKey), webDevice.pubkey);
  const secretHex = hex(Uint8Array.from(held[0].secret));
  assert.ok(!sent.some((r) => r.includes(secretHex)), 'the secret key was never sent');
  // Every later call names the device.
  const pending = await socket.update('device_pending', (p) => p.device_id === idOf(webDevice));
  assert.equal(pending.payload.pubkey, webDevice.pubkey);
  assert.equal(socket.updates('device_added').length, 0, 'no device_added before the user confirms');
  collect(page);
});

test('Verify from New chat: the emoji the bridge computes, a malformed code refused with its reason, a typed code sent as enrol_proof, and back to the form as it was', async () => {
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.fill('#new-title', 'A title typed before verifying');
  await page.click('#new-encryption a:has-text("verify this machine")');
  await page.waitForURL(/#\/verify\/.+\?from=new$/);
  const shown = await waitFor('the SAS', async () => {
    const el = await page.$('ol.sas');
    return el && el.getAttribute('data-sas');
  });
  assert.equal(shown, sasOf(webDevice.pubkey), 'the bridge derives the same four emoji');
  assert.equal((await page.innerText('ol.sas')).replace(/\s+/g, ' ').trim(), shown);
  assert.doesNotMatch(await page.innerText('main'), /\bnull\b|\bundefined\b/, 'no stray null on the screen');
  assert.equal(await page.$$eval('ol.sas', (els) => els.length), 1);
  assert.equal(await page.inputValue('#enrol-code'), '', 'nothing prefilled without a link');
  await shots(page, 'verify-code-empty');
  assert.deepEqual(await axe(page), []);
  // A code with an O (codes have none): said why, nothing sent.
  await page.fill('#enrol-code', 'k7qw m3zp tr8n hx2c v9yO');
  await page.click('button:has-text("They match")');
  await page.waitForSelector('#enrol-error:not([hidden])');
  assert.match(await page.innerText('#enrol-error'), /has O \(codes use no O, 0, I or 1\)/);
  assert.equal(await page.getAttribute('#enrol-code', 'aria-invalid'), 'true');
  await page.fill('#enrol-code', 'K7QW-M3ZP');
  await page.click('button:has-text("They match")');
  assert.match(await page.innerText('#enrol-error'), /has 8 letters and digits; the machine's has 20/);
  await shots(page, 'verify-code-malformed');
  assert.deepEqual(confirms(), [], 'a malformed code sends nothing');
  assert.equal(socket.updates('device_added').length, 0);
  // Typed as a person types it (lower case, spaces): grouped in fours as the machine shows it.
  await page.fill('#enrol-code', '');
  await page.type('#enrol-code', SECRET.code.toLowerCase().replace(/-/g, ' '));
  assert.equal(await page.inputValue('#enrol-code'), SECRET.code);
  assert.equal(await page.isHidden('#enrol-error'), true, 'the message goes once the code is right');
  await page.click('button:has-text("They match")');
  // Back where the person started, the form as they left it, with a confirmation.
  await page.waitForURL(new RegExp(`#/new/${installationId}$`));
  assert.equal(await page.inputValue('#new-title'), 'A title typed before verifying');
  await page.waitForSelector('#new-encryption .pill-lock');
  await waitFor('the confirmation', async () => (await page.innerText('#toasts')).includes('verified with its code'));
  await shots(page, 'verify-back-to-new-chat');
  const proof = enrolProofOf(SECRET.code, bridgeDevice, idOf(webDevice), webDevice.pubkey);
  assert.deepEqual(confirms(), [{ bridge_device_id: bridgeDevice, enrol_proof: proof }], 'the proof of the code, never the code');
  const mine = await me('GET', '/v1/me/devices', undefined, { 'X-Relay-Device': idOf(webDevice) });
  assert.equal(mine.devices.find((d) => idOf(d) === bridgeDevice).confirmed_by_me, true);
  const added = await socket.update('device_added', (p) => p.device_id === idOf(webDevice));
  assert.equal(added.payload.pubkey, webDevice.pubkey);
  await page.goto(`${relay.url}/#/settings`);
  await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="code"]`);
  await scrollToDevice(page, bridgeDevice);
  await shots(page, 'settings-bridge-code');
  assert.deepEqual(await axe(page), []);
  collect(page);
  // Needs the lead's relayd (issue 34): it carries enrol_proof in the bridge's device_added.
  assert.equal(added.payload.enrol_proof, proof, 'relayd carries the proof to the bridge as given');
});

test('Verify again without a code: it still confirms, then shows the command the machine\'s owner runs with this device\'s id; Settings says the machine is waiting', async () => {
  const before = socket.updates('device_added').length;
  await page.goto(`${relay.url}/#/settings`);
  await page.click(`.device-item[data-device="${bridgeDevice}"] a:has-text("Verify again")`);
  await page.waitForSelector('ol.sas[data-sas]');
  await page.click('button:has-text("They match")');
  await page.waitForSelector('main .success');
  const command = `relay-bridge devices confirm ${idOf(webDevice)}`;
  assert.equal(await page.innerText('main .code-box code'), command);
  assert.match(await page.innerText('main'), /sends this device its keys only after that/);
  await shots(page, 'verify-no-code-command');
  assert.deepEqual(await axe(page), []);
  // Its Copy button copies the command whole.
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: relay.url });
  await page.click('main .code-box button.code-copy');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), command);
  const again = await waitFor('device_added again', () => socket.updates('device_added').slice(before).find((u) => u.payload.device_id === idOf(webDevice)));
  assert.equal(again.payload.enrol_proof ?? null, null, 'no proof without a code');
  assert.deepEqual(confirms().pop(), { bridge_device_id: bridgeDevice });
  await page.click('main button:has-text("Back to Settings")');
  await page.waitForURL(/#\/settings$/);
  const row = await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="waiting"]`);
  assert.match(await row.innerText(), /Waiting for the machine/);
  assert.equal(await row.$eval('code', (el) => el.textContent), command);
  await scrollToDevice(page, bridgeDevice);
  await shots(page, 'settings-bridge-waiting');
  // New chat says so too.
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await waitFor('the waiting note', async () => (await page.innerText('#new-encryption')).includes('waits for its owner to confirm this device'));
  await shots(page, 'new-chat-machine-waiting');
  await page.goto(`${relay.url}/#/machines`);
  await page.waitForSelector('.installation .bridge-status[data-state="waiting"]');
  await shots(page, 'machines-machine-waiting');
  assert.deepEqual(await axe(page), []);
  // A chat encrypted while the machine waits: an upgraded bridge refuses its grant then, so each start of
  // the app grants it again (signed, the same key), until the machine has taken this device.
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  waitingSession = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  const first = await socket.update('session_key_granted', (p) => p.session_id === waitingSession && p.device_id === bridgeDevice);
  await page.reload();
  await page.waitForSelector('.composer-input');
  const regranted = await waitFor('the grant again at start', () => waitingGrants()[1]);
  assert.equal(regranted.payload.grant_sig, grantSigOf(regranted.payload, webDevice.pubkey));
  assert.equal(hex(unwrap(regranted.payload.wrapped_session_key, bridgeKeys.secretKey)), hex(unwrap(first.payload.wrapped_session_key, bridgeKeys.secretKey)));
  collect(page);
});

test('Verify from the link relay-bridge prints (#/verify/<installation>?enrol=): the code prefilled, out of the address bar, sent as enrol_proof', async () => {
  // This browser as it was before machines asked for a code: confirmed, with no record of how.
  await page.goto(`${relay.url}/#/settings`);
  await page.evaluate((id) => localStorage.removeItem(`relay.enrol.${id}`), idOf(webDevice));
  await page.reload();
  const row = await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="earlier"]`);
  assert.match(await row.innerText(), /Verified before machines asked for their code/);
  assert.ok(await page.$(`.device-item[data-device="${bridgeDevice}"] a.btn-primary:has-text("Verify again")`), 'Verify again, first among its actions');
  await scrollToDevice(page, bridgeDevice);
  await shots(page, 'settings-bridge-earlier');
  // A link with a malformed code: the field says so at once.
  await page.goto(`${relay.url}/#/verify/${installationId}?enrol=not-a-code`);
  await page.waitForSelector('#enrol-error:not([hidden])');
  assert.match(await page.innerText('#enrol-error'), /has O \(codes use no O, 0, I or 1\)/);
  const before = socket.updates('device_added').length;
  await page.goto(`${relay.url}/#/verify/${installationId}?enrol=${SECRET.linkCode.toLowerCase()}`);
  await page.waitForSelector('ol.sas[data-sas]');
  assert.equal(await page.inputValue('#enrol-code'), SECRET.linkCode);
  assert.doesNotMatch(page.url(), /enrol/i, 'the code left the address bar');
  assert.equal(await page.evaluate(() => history.length >= 1 && location.hash), `#/verify/${installationId}`);
  assert.match(await page.innerText('#enrol-hint'), /Filled in from the link/);
  await shots(page, 'verify-code-from-link');
  await page.click('button:has-text("They match")');
  await page.waitForURL(/#\/settings$/);
  const proof = enrolProofOf(SECRET.linkCode, bridgeDevice, idOf(webDevice), webDevice.pubkey);
  assert.deepEqual(confirms().pop(), { bridge_device_id: bridgeDevice, enrol_proof: proof });
  // Verified again: the chat made while the machine waited is granted to it once more, after the confirmation.
  await waitFor('the grant after the confirmation', () => waitingGrants()[2]);
  const grants = waitingGrants().length;
  await page.reload();
  await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="code"]`);
  await sleep(1000);
  assert.equal(waitingGrants().length, grants, 'no longer granted at each start: the machine has the code');
  const again = await waitFor('device_added again', () => socket.updates('device_added').slice(before).find((u) => u.payload.device_id === idOf(webDevice)));
  // Used: the tab forgets it.
  assert.deepEqual(await page.evaluate(() => Object.keys(sessionStorage).filter((k) => k.startsWith('relay.enrol'))), []);
  await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="code"]`);
  collect(page);
  // Needs the lead's relayd (issue 34).
  assert.equal(again.payload.enrol_proof, proof);
});

test('a new chat on the verified machine is encrypted: the key is made in the browser and wrapped for the bridge', async () => {
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await page.fill('#new-title', SECRET.title);
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sessionId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  const session = (await me('GET', '/v1/me')).sessions.find((s) => s.id === sessionId);
  assert.equal(session.encrypted, true);
  const granted = await socket.update('session_key_granted', (p) => p.session_id === sessionId && p.device_id === bridgeDevice);
  assert.equal(granted.payload.wrapped_by_device_id, idOf(webDevice));
  // Signed, so that the bridge can tell this wrap from one the relay made in the device's name.
  assert.equal(granted.payload.grant_sig, grantSigOf(granted.payload, webDevice.pubkey));
  sessionKey = unwrap(granted.payload.wrapped_session_key, bridgeKeys.secretKey);
  assert.equal(sessionKey.length, 32);
  // The title went sealed: the relay holds title_ct, the bridge opens it.
  assert.equal(session.title || null, null);
  assert.equal(open(sessionKey, `session_meta/${sessionId}`, session.title_ct), SECRET.title);
  await page.waitForSelector('.chat-subtitle .pill-lock');
  assert.equal(await page.innerText('.chat-title'), SECRET.title);
  collect(page);
});

test('an encrypted turn: the message goes sealed, the reply, a task and an approval come sealed and read in clear; the decision is signed', async () => {
  await page.fill('.composer-input', SECRET.user);
  await page.click('button[aria-label="Send"]');
  const message = await socket.update('session.message', (p) => p.session && p.session.id === sessionId);
  interactionId = message.interaction_id;
  assert.equal(message.payload.message.text || '', '');
  assert.equal(open(sessionKey, `messages/${sessionId}`, message.payload.message.text_ct), SECRET.user);

  const path = `messages/${sessionId}`;
  const { message_id: messageId } = await bridge('sendMessage', { session_id: sessionId, interaction_id: interactionId,
    text_ct: seal(sessionKey, path, ''), idempotency_key: key() });
  for (const d of SECRET.delta) await bridge('sendMessageDelta', { message_id: messageId, delta_ct: seal(sessionKey, path, d), idempotency_key: key() });
  await waitFor('the streamed reply', async () => (await lastAgentText(page)) === SECRET.reply);
  await bridge('sendMessageEnd', { message_id: messageId, text_ct: seal(sessionKey, path, SECRET.reply), finish_reason: 'tool_call', idempotency_key: key() });

  const tasks = `tasks/${sessionId}`;
  await bridge('createTask', { session_id: sessionId, interaction_id: interactionId, task_id: 'call_read', kind: 'read',
    status_label_ct: seal(sessionKey, tasks, SECRET.task), args_ct: seal(sessionKey, tasks, JSON.stringify({ path: SECRET.args })) });
  await bridge('finishTask', { session_id: sessionId, interaction_id: interactionId, task_id: 'call_read', status: 'completed',
    result_ct: seal(sessionKey, tasks, JSON.stringify({ content: [{ type: 'text', text: SECRET.result }] })) });
  const card = await page.waitForSelector('[data-task-id="call_read"]');
  await waitFor('the task opened', async () => (await card.innerText()).includes(SECRET.task));
  // The result's disclosure comes with task_completed, which may follow the card's first drawing: open
  // what the card has each time (a disclosure the reader opened stays open across a redraw).
  await waitFor('its result', async () => {
    await card.$$eval('details', (ds) => ds.forEach((d) => { d.open = true; }));
    return (await card.innerText()).includes(SECRET.result);
  });

  await bridge('requestApproval', { session_id: sessionId, interaction_id: interactionId, approval_id: 'apr_shred', action: 'execute',
    severity: 'high', idempotency_key: key(),
    details_ct: seal(sessionKey, `approvals/${sessionId}`, JSON.stringify({ title: 'Run a command', message: 'The agent wants to run it.',
      command: SECRET.approval, host: 'laptop', tool_call_id: 'call_shred', approval_slug: 'exec' })) });
  const approval = await page.waitForSelector('.approval-pending');
  assert.match(await approval.innerText(), /shred-the-marmalade --verbose/);
  assert.equal(await approval.$('button[data-choice="always"]'), null, 'no grant in an encrypted chat: relayd would answer nothing by it');
  await screenshot(page, 'e2e-approval');
  assert.deepEqual(await axe(page), []);
  await page.click('.approval-pending button[data-choice="once"]');
  const resolved = await socket.update('approval.resolved', (p) => p.approval_id === 'apr_shred');
  const p = resolved.payload;
  assert.equal(p.decision, 'approve');
  assert.equal(p.device_id, idOf(webDevice), 'the decision names the device that signed it');
  assert.equal(p.decision_sig, expectedSig(webDevice.pubkey, { approvalId: 'apr_shred', decision: p.decision, scope: p.scope, deviceId: p.device_id }),
    'the decision is signed with the key the phone and the bridge share');
  // A signature by another key does not verify: the bridge can tell a forged decision.
  const other = nacl.box.keyPair();
  assert.notEqual(p.decision_sig, expectedSig(hex(other.publicKey), { approvalId: 'apr_shred', decision: p.decision, scope: p.scope, deviceId: idOf(webDevice) }));
  collect(page);
});

test('the inbox reads an encrypted chat\'s reply and failed tool call with this device\'s key, and sends nothing', async () => {
  await page.goto(`${relay.url}/#/inbox`);
  await page.waitForSelector('main h1:has-text("Inbox")');
  const from = sent.length;
  const tasks = `tasks/${sessionId}`;
  await bridge('createTask', { session_id: sessionId, interaction_id: interactionId, task_id: 'call_fig', kind: 'read',
    status_label_ct: seal(sessionKey, tasks, 'Reading the figs') });
  await bridge('finishTask', { session_id: sessionId, interaction_id: interactionId, task_id: 'call_fig', status: 'failed',
    error_ct: seal(sessionKey, tasks, SECRET.inboxError) });
  const path = `messages/${sessionId}`;
  const { message_id: messageId } = await bridge('sendMessage', { session_id: sessionId, interaction_id: interactionId,
    text_ct: seal(sessionKey, path, ''), idempotency_key: key() });
  await bridge('sendMessageEnd', { message_id: messageId, text_ct: seal(sessionKey, path, SECRET.inbox), finish_reason: 'stop', idempotency_key: key() });
  const line = (kind) => page.$$eval(`.inbox-link[data-kind="${kind}"]`, (links) => links.map((a) => [a.querySelector('.session-title').textContent, a.querySelector('.inbox-what').textContent]));
  await waitFor('the reply in clear in the inbox', async () => JSON.stringify(await line('reply')) === JSON.stringify([[SECRET.title, SECRET.inbox]]) || null);
  await waitFor('the failed tool call in clear', async () => JSON.stringify(await line('failed-task')) === JSON.stringify([[SECRET.title, `Tool call failed: read: ${SECRET.inboxError}`]]) || null)
    .catch(async (err) => {
      // A failure says what the inbox counted from (its marks, on the relay's clock) and when the task changed:
      // it failed once in ten runs here, with the reply listed and the failed task not.
      const marks = await page.evaluate(() => Object.entries(localStorage).filter(([k]) => k.startsWith('relay.inbox.')));
      const items = (await me('GET', `/v1/me/sessions/${sessionId}/timeline?limit=5`)).items || [];
      const task = items.map((i) => i.task).find((t) => t && t.task_id === 'call_fig');
      assert.fail(`${err.message}: ${await page.innerText('main')}\n--- marks ${JSON.stringify(marks)}; now ${Date.now()}; ` +
        `the task ${JSON.stringify(task && { created_at: task.created_at, updated_at: task.updated_at, status: task.status })}`);
    });
  assert.ok(await page.$('.inbox-link[data-kind="reply"] .lock'), 'the entry says the chat is encrypted');
  // Opening the reply: the chat, at the reply, in clear.
  await page.click('.inbox-link[data-kind="reply"]');
  await page.waitForSelector(`[data-key="m:${messageId}"].revealed`);
  assert.equal(await lastAgentText(page), SECRET.inbox);
  assert.deepEqual(sent.slice(from).filter((r) => !r.startsWith('GET ')), [], 'the inbox only reads');
  collect(page);
});

test('an encrypted capability request: the reason reads in clear, the location leaves sealed (answer_ct)', async () => {
  await page.context().grantPermissions(['geolocation'], { origin: relay.url });
  await page.context().setGeolocation(WHERE);
  await page.fill('.composer-input', SECRET.ask);
  await page.click('button[aria-label="Send"]');
  const message = await socket.update('session.message', (p) => p.session && p.session.id === sessionId && p.message &&
    open(sessionKey, `messages/${sessionId}`, p.message.text_ct) === SECRET.ask);
  const caps = `capabilities/${sessionId}`;
  // The plain reason is refused in an encrypted session, by name.
  await assert.rejects(bridge('requestDeviceCapability', { session_id: sessionId, interaction_id: message.interaction_id,
    capability: 'location', reason: SECRET.reason, idempotency_key: key() }), /400/);
  const asked = await bridge('requestDeviceCapability', { session_id: sessionId, interaction_id: message.interaction_id,
    capability: 'location', reason_ct: seal(sessionKey, caps, SECRET.reason), idempotency_key: key() });
  const card = await page.waitForSelector('.capability-pending');
  await waitFor('the reason opened', async () => (await card.$eval('.capability-reason', (e) => e.textContent)) === SECRET.reason);
  await page.click('.capability-pending button[data-choice="share"]');
  const result = await socket.update('device_capability.result', (p) => p.request_id === asked.request_id);
  assert.equal(result.payload.status, 'answered');
  assert.equal(result.payload.location, undefined, 'no location in clear');
  assert.deepEqual(JSON.parse(open(sessionKey, caps, result.payload.answer_ct)), { location: WHERE });
  await page.waitForSelector('.capability-answered .approval-outcome:has-text("Location shared")');
  collect(page);
});

test('an encrypted attachment: sealed before upload, its name and type in meta_ct; the bridge opens the very bytes', async () => {
  await page.setInputFiles('#attach-file', { name: SECRET.file, mimeType: 'text/plain', buffer: Buffer.from(SECRET.fileText) });
  await page.waitForSelector('.chip-ready');
  await page.fill('.composer-input', 'see the survey');
  await page.click('button[aria-label="Send"]');
  const message = await socket.update('session.message', (p) => p.session && p.session.id === sessionId && p.message &&
    (p.message.attachments || []).length === 1);
  const item = message.payload.message.attachments[0];
  assert.equal(item.mime, 'application/octet-stream');
  assert.equal(item.name || null, null);
  const files = `attachments/${sessionId}`;
  const meta = JSON.parse(open(sessionKey, files, item.meta_ct));
  assert.deepEqual({ name: meta.name, mime: meta.mime, size: meta.size }, { name: SECRET.file, mime: 'text/plain', size: Buffer.byteLength(SECRET.fileText) });
  const envelope = Buffer.from(await (await fetch(item.url)).arrayBuffer());
  const bytes = openBytes(hkdf(sessionKey, `sophon/v1/blob/${files}`, 32), envelope);
  assert.equal(bytes.toString('utf8'), SECRET.fileText);
  assert.equal(createHash('sha256').update(bytes).digest('hex'), meta.sha256);
  // The chat shows the real name; a click fetches the envelope, opens it here and saves the file under its name.
  const link = await page.waitForSelector(`.msg-user .attachment-sealed:has-text("${SECRET.file}")`);
  const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
  assert.ok((await link.getAttribute('href')).startsWith('blob:'), 'opened in the page, from a local blob');
  assert.equal(download.suggestedFilename(), SECRET.file);
  assert.equal(readFileSync(await download.path(), 'utf8'), SECRET.fileText);
  collect(page);
});

test('a reload reads the whole chat again from sealed history', async () => {
  await page.reload();
  await page.waitForSelector('.msg-agent .msg-body');
  await waitFor('the history opened', async () => {
    const text = await page.innerText('.timeline');
    return text.includes(SECRET.user) && text.includes(SECRET.reply) && text.includes(SECRET.task);
  });
  assert.equal(await page.innerText('.chat-title'), SECRET.title);
  collect(page);
});

// Another device of the user, on page p, verifies the machine; the bridge, told of that device, wraps the
// chat's key for it (unsigned, as the protocol authors' bridge does).
async function verifyAndGrant(p, device) {
  await p.goto(`${relay.url}/#/verify/${bridgeDevice}`);
  await p.click('button:has-text("They match")');
  await p.waitForSelector('main .success');
  const added = await socket.update('device_added', (u) => u.device_id === idOf(device));
  await bridge(`sessions/${sessionId}/recipients`, { recipients: [{ device_id: idOf(device), wrapped_session_key: wrap(sessionKey, added.payload.pubkey) }],
    wrapped_by_device_id: bridgeDevice });
}

test('a device without the key: a readable placeholder, never a crash; the key granted later opens it', async () => {
  const context = await browser.newContext({ viewport: PHONE_390, baseURL: relay.url, serviceWorkers: 'allow' });
  const second = watch(await context.newPage());
  second.problems = [];
  second.on('pageerror', (err) => second.problems.push(`pageerror: ${err.message}`));
  await signIn(second, relay);
  const device = await waitFor('the second web device', async () => (await me('GET', '/v1/me/devices')).devices.find((d) => d.platform === 'web' && idOf(d) !== idOf(webDevice)));
  await second.goto(`${relay.url}/#/s/${sessionId}`);
  await waitFor('the placeholder', async () => (await second.innerText('.timeline')).includes('Waiting for this device to receive the key'));
  await second.waitForSelector('.chat-subtitle .pill-warn');
  assert.ok(!(await second.innerText('body')).includes(SECRET.reply));
  await screenshot(second, 'e2e-locked');
  // It verifies the machine; the bridge, told of it, wraps the key for it.
  await verifyAndGrant(second, device);
  await second.goto(`${relay.url}/#/s/${sessionId}`);
  await waitFor('the chat opened with the granted key', async () => (await second.innerText('.timeline')).includes(SECRET.reply));
  assert.deepEqual(second.problems, []);
  await context.close();
});

test('a key granted before the page\'s stream first answers still opens the chat: the page reads the keys it missed', async () => {
  // session_key_granted is an event: one made while no stream of the page is attached reaches no stream,
  // and a first connection has no Last-Event-ID to replay it from. The stream is held until the grant is made.
  const context = await browser.newContext({ viewport: PHONE_390, baseURL: relay.url, serviceWorkers: 'allow' });
  let release;
  const granted = new Promise((resolve) => { release = resolve; });
  let held = 0;
  await context.route('**/v1/me/stream*', async (route) => {
    held++;
    await granted;
    await route.continue();
  });
  const third = watch(await context.newPage());
  third.problems = [];
  third.on('pageerror', (err) => third.problems.push(`pageerror: ${err.message}`));
  const known = new Set((await me('GET', '/v1/me/devices')).devices.map(idOf));
  await signIn(third, relay);
  const device = await waitFor('the third web device', async () => (await me('GET', '/v1/me/devices')).devices.find((d) => d.platform === 'web' && !known.has(idOf(d))));
  await verifyAndGrant(third, device);
  assert.ok(held > 0, 'the page asked for its stream before the grant');
  release();
  await third.goto(`${relay.url}/#/s/${sessionId}`);
  await waitFor('the chat opened with the key granted before the stream', async () => (await third.innerText('.timeline')).includes(SECRET.reply));
  assert.deepEqual(third.problems, []);
  await context.close();
});

test('revoking a device rotates the chat\'s key: a new key for the bridge, the old one kept for old messages', async () => {
  // A second phone that confirmed the machine, then is lost.
  const lost = nacl.box.keyPair();
  const reg = await me('POST', '/v1/me/devices', { pubkey: hex(lost.publicKey), label: 'Lost phone', platform: 'ios' });
  const lostId = reg.device_id || idOf(reg.device || reg);
  await me('POST', `/v1/me/devices/${lostId}/confirm`, { bridge_device_id: bridgeDevice }, { 'X-Relay-Device': lostId });
  oldKey = sessionKey;
  const before = socket.updates('session_key_granted').length;
  await page.goto(`${relay.url}/#/settings`);
  await page.click('button[aria-label="Revoke Lost phone"]');
  await page.click('dialog button:has-text("Revoke")');
  await socket.update('device_revoked', (p) => p.device_id === lostId);
  const grant = await waitFor('a new key for the bridge', () => socket.updates('session_key_granted')
    .slice(before).find((u) => u.payload.session_id === sessionId && u.payload.device_id === bridgeDevice));
  assert.equal(grant.payload.grant_sig, grantSigOf(grant.payload, webDevice.pubkey), 'a rotated key is signed too');
  sessionKey = unwrap(grant.payload.wrapped_session_key, bridgeKeys.secretKey);
  assert.notEqual(hex(sessionKey), hex(oldKey), 'a new key');
  // The lost phone's wraps are gone.
  await assert.rejects(me('GET', `/v1/me/devices/${lostId}/keys`, undefined, { 'X-Relay-Device': lostId }), (err) => err.status === 404 || err.status === 409);
  // What the bridge seals with the new key reads on the phone; the old messages still read.
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await bridge('sendMessage', { session_id: sessionId, interaction_id: interactionId, text_ct: seal(sessionKey, `messages/${sessionId}`, SECRET.rotated),
    idempotency_key: key() });
  await waitFor('the message sealed with the new key', async () => (await page.innerText('.timeline')).includes(SECRET.rotated));
  await page.reload();
  await waitFor('old and new after a reload', async () => {
    const text = await page.innerText('.timeline');
    return text.includes(SECRET.reply) && text.includes(SECRET.rotated);
  });
  collect(page);
});

test('a grant the relay makes for the page, unsigned, forged or in the page\'s own name, does not change the key it seals with; the bridge\'s signed grant does', async () => {
  const refused = [];
  const seen = [];
  const onConsole = (msg) => {
    seen.push(`${msg.type()}: ${msg.text()}`);
    if (msg.type() === 'warning' && msg.text().includes('was refused')) refused.push(msg.text());
  };
  page.on('console', onConsole);
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.waitForSelector('.composer-input');
  // The page's stream is up once a reply sent now shows: the grants below reach it as events.
  await bridge('sendMessage', { session_id: sessionId, interaction_id: interactionId, text_ct: seal(sessionKey, `messages/${sessionId}`, 'The stream is live: ibis'),
    idempotency_key: key() });
  await waitFor('the stream live', async () => (await page.innerText('.timeline')).includes('The stream is live: ibis'));
  const web = idOf(webDevice);
  const path = `sessions/${sessionId}/recipients`;
  // The relay's own keys, wrapped for the page: as the bridge without grant_sig, and with one made under another key.
  const injected = [randomBytes(32), randomBytes(32), randomBytes(32)].map((b) => new Uint8Array(b));
  await bridge(path, { recipients: [{ device_id: web, wrapped_session_key: wrap(injected[0], webDevice.pubkey) }], wrapped_by_device_id: bridgeDevice });
  const forgedWrap = wrap(injected[1], webDevice.pubkey);
  const stranger = nacl.box.keyPair();
  const forgedSig = createHmac('sha256', Buffer.from(hkdf(nacl.box.before(unhex(webDevice.pubkey), stranger.secretKey), 'relay/v1/grant', 32)))
    .update(Buffer.from(`relay/v1/grant\xff${sessionId}\xff${forgedWrap}\xff${bridgeDevice}`, 'latin1')).digest('base64');
  await bridge(path, { recipients: [{ device_id: web, wrapped_session_key: forgedWrap, grant_sig: forgedSig }], wrapped_by_device_id: bridgeDevice });
  await waitFor('both grants refused by the page', () => refused.length >= 2).catch((err) => assert.fail(`${err.message}; console: ${seen.join(' | ')}`));
  // In the page's own name, unsigned: at most a key to read with, never the one it seals with.
  await me('POST', `/v1/me/${path}`, { recipients: [{ device_id: web, wrapped_session_key: wrap(injected[2], webDevice.pubkey) }], wrapped_by_device_id: web },
    { 'X-Relay-Device': web });
  await sleep(1000);
  const sendAndOpen = async (text) => {
    const before = socket.updates('session.message').length;
    await page.fill('.composer-input', text);
    await page.click('button[aria-label="Send"]');
    const m = await waitFor('the sealed send', () => socket.updates('session.message').slice(before)
      .find((u) => u.payload.session && u.payload.session.id === sessionId && u.payload.message && u.payload.message.text_ct));
    return m.payload.message.text_ct;
  };
  const checkSealedWith = (ct, real, text) => {
    assert.equal(open(real, `messages/${sessionId}`, ct), text, 'the next send opens with the real key');
    for (const k of injected) assert.throws(() => open(k, `messages/${sessionId}`, ct), 'and not with a key the relay injected');
  };
  checkSealedWith(await sendAndOpen('Sealed with the real key'), sessionKey, 'Sealed with the real key');
  // A reload reads the wraps back from the keys route (the last one is the relay's): still the real key.
  await page.reload();
  await page.waitForSelector('.composer-input');
  checkSealedWith(await sendAndOpen('Still the real key after a reload'), sessionKey, 'Still the real key after a reload');
  // The bridge's own grant, signed for this page (what relay-bridge does): it becomes the key the page seals with.
  const next = new Uint8Array(randomBytes(32));
  const signedWrap = wrap(next, webDevice.pubkey);
  const sig = createHmac('sha256', Buffer.from(hkdf(nacl.box.before(unhex(webDevice.pubkey), bridgeKeys.secretKey), 'relay/v1/grant', 32)))
    .update(Buffer.from(`relay/v1/grant\xff${sessionId}\xff${signedWrap}\xff${bridgeDevice}`, 'latin1')).digest('base64');
  await bridge(path, { recipients: [{ device_id: web, wrapped_session_key: signedWrap, grant_sig: sig }], wrapped_by_device_id: bridgeDevice });
  await waitFor('the signed key sealing the next send', async () => {
    const ct = await sendAndOpen('Sealed with the signed key');
    try {
      return open(next, `messages/${sessionId}`, ct) === 'Sealed with the signed key';
    } catch (err) {
      return false;
    }
  });
  sessionKey = next;
  page.off('console', onConsole);
  // A grant the bridge signed for this device, after its confirmation: the machine took this device.
  await page.goto(`${relay.url}/#/settings`);
  const row = await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="keys"]`);
  assert.match(await row.innerText(), /Keys received/);
  await scrollToDevice(page, bridgeDevice);
  await shots(page, 'settings-bridge-keys');
  collect(page);
});

test('push: the service worker opens text_ct with the key in IndexedDB; without a key it says only "New message"', async () => {
  const context = page.context();
  await context.grantPermissions(['notifications'], { origin: relay.url });
  // No window of the app open (a reply's notification is skipped while one is in front): the worker shows it.
  const blank = await context.newPage();
  collect(page);
  await page.close();
  const cdp = await context.newCDPSession(blank);
  const registrations = [];
  cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => registrations.push(...e.registrations));
  await cdp.send('ServiceWorker.enable');
  const registration = await waitFor('the worker registration', () => registrations.find((r) => r.scopeURL === `${relay.url}/` && !r.isDeleted));
  const deliver = (note) => cdp.send('ServiceWorker.deliverPushMessage', { origin: relay.url, registrationId: registration.registrationId, data: JSON.stringify(note) });
  const notes = async () => {
    const worker = context.serviceWorkers().find((w) => w.url().startsWith(relay.url));
    if (!worker) return [];
    return worker.evaluate(async () => (await self.registration.getNotifications()).map((n) => ({ title: n.title, body: n.body, tag: n.tag })));
  };
  // The closed page may still count as a window for a moment: the worker would skip a reply's notification.
  await waitFor('no window of the app', async () => {
    const worker = context.serviceWorkers().find((w) => w.url().startsWith(relay.url));
    return worker && (await worker.evaluate(async () => (await self.clients.matchAll({ type: 'window', includeUncontrolled: true })).length)) === 0;
  });
  await deliver({ kind: 'reply', session_id: sessionId, message_id: 'msg_x', title: 'New message', url: `/#/s/${sessionId}`,
    text_ct: seal(sessionKey, `messages/${sessionId}`, SECRET.push) });
  const shown = await waitFor('the opened notification', async () => (await notes()).find((n) => n.tag === sessionId));
  assert.equal(shown.body, SECRET.push);
  await deliver({ kind: 'reply', session_id: 'ses_unknown', message_id: 'msg_y', title: 'New message', url: '/',
    text_ct: seal(randomBytes(32), 'messages/ses_unknown', 'nobody can read this') });
  const generic = await waitFor('the generic notification', async () => (await notes()).find((n) => n.tag === 'ses_unknown'));
  assert.equal(generic.title, 'New message');
  assert.ok(!generic.body.includes('nobody can read this'));
  // An approval's details_ct, as relayd pushes it (title "Approval needed", no body).
  await deliver({ kind: 'approval', title: 'Approval needed', body: '', severity: 'high', session_id: sessionId, approval_id: 'apr_pushed',
    url: `/#/s/${sessionId}`, encrypted: true, details_ct: seal(sessionKey, `approvals/${sessionId}`,
      JSON.stringify({ title: 'Run a command', message: 'The agent wants to run it.', command: SECRET.approval, host: 'laptop' })) });
  const approvalNote = await waitFor('the opened approval notification', async () => (await notes()).find((n) => n.tag === 'apr_pushed'));
  assert.deepEqual({ title: approvalNote.title, body: approvalNote.body }, { title: 'Approval needed: Run a command', body: SECRET.approval });
  await deliver({ kind: 'approval', title: 'Approval needed', body: '', session_id: 'ses_unknown', approval_id: 'apr_sealed', url: '/', encrypted: true,
    details_ct: seal(randomBytes(32), 'approvals/ses_unknown', '{"title":"nobody can read this"}') });
  const sealedNote = await waitFor('the generic approval notification', async () => (await notes()).find((n) => n.tag === 'apr_sealed'));
  assert.deepEqual({ title: sealedNote.title, body: sealedNote.body }, { title: 'Approval needed: a request', body: '' });
  await cdp.detach();
  page = watch(blank);
  page.problems = [];
  page.on('pageerror', (err) => page.problems.push(`pageerror: ${err.message}`));
  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.waitForSelector('.composer-input');
});

test('the pairing link\'s #enrol=: kept for the machine that claim pairs, prefilled on its Verify screen once its bridge has a key, then forgotten', async () => {
  const start = await call('POST', '/v1/pairing/start', '', { connector_type: 'acp', host_label: 'desktop' });
  await page.goto(`${relay.url}/pair?code=${start.code}#enrol=${SECRET.pairCode}`);
  await page.waitForSelector('#pair-code');
  assert.doesNotMatch(page.url(), /enrol/i, 'the code left the address bar');
  assert.equal(await page.inputValue('#pair-code'), start.code);
  await page.click('form button:has-text("Pair")');
  await page.waitForSelector('.pair-result a:has-text("Verify it")');
  await shots(page, 'pair-with-enrol-code');
  await page.click('.pair-result a:has-text("Verify it")');
  await waitFor('the screen waiting for the bridge\'s key', async () => (await page.innerText('main')).includes('has not registered its encryption key yet'));
  await shots(page, 'verify-waiting-for-bridge');
  const paired = await call('POST', '/v1/pairing/poll', '', { poll_token: start.poll_token });
  const desktop = nacl.box.keyPair();
  const registered = await call('POST', '/v1/bridge/devices', paired.token, { pubkey: hex(desktop.publicKey), label: 'desktop bridge' });
  // The screen looks again every 3 s until the bridge has registered its key.
  await page.waitForSelector('ol.sas[data-sas]', { timeout: WAIT });
  assert.equal(await page.inputValue('#enrol-code'), SECRET.pairCode);
  await page.click('button:has-text("They match")');
  await page.waitForURL(new RegExp(`#/new/${paired.installation_id}$`));
  const proof = enrolProofOf(SECRET.pairCode, registered.device_id, idOf(webDevice), webDevice.pubkey);
  assert.deepEqual(confirms().pop(), { bridge_device_id: registered.device_id, enrol_proof: proof });
  assert.deepEqual(await page.evaluate(() => Object.keys(sessionStorage).filter((k) => k.startsWith('relay.enrol'))), []);
  collect(page);
});

test('the relay never received a secret word in clear: not in any request the pages sent, nor in its files', async () => {
  const words = Object.values(SECRET).flat().filter((w) => w.length > 12);
  const leaks = sent.filter((r) => words.some((w) => r.includes(w)));
  assert.deepEqual(leaks, []);
  assert.ok(sent.some((r) => r.includes('text_ct')), 'the sends went as text_ct');
  // relayd's data folder (SQLite and its journal) and its log.
  const files = filesUnder(relay.data);
  assert.ok(files.length > 0);
  for (const f of files) {
    const bytes = readFileSync(f);
    for (const w of words) assert.equal(bytes.includes(Buffer.from(w, 'utf8')), false, `${w} in ${f}`);
  }
  const log = relay.log.join('');
  for (const w of words) assert.ok(!log.includes(w), `${w} in relayd's log`);
  // The page's copy of tweetnacl is the one npm serves for 1.0.3.
  assert.equal(readFileSync(join(ROOT, 'web', 'app', 'vendor', 'tweetnacl', 'nacl-fast.js'), 'utf8'),
    readFileSync(join(ROOT, 'tests', 'browser', 'node_modules', 'tweetnacl', 'nacl-fast.js'), 'utf8'));
});
