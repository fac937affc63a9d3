// The protocol authors' production bridge client (@sophonai/bridge 0.13.7, vendored unmodified in
// sophon-bridge/vendor and checked against its pinned SHA-256 list) pairs with a real relayd and
// runs one whole encrypted turn with Relay's web client, in Debian's headless Chromium, as the
// phone: the user claims the bridge's code, compares the bridge's emoji (SAS) and confirms it,
// starts an encrypted chat, sends; the bridge decrypts and hands the text to a scripted stand-in
// OpenClaw gateway (openclaw_standin.js), whose streamed reply, tool call and approval request the
// bridge encrypts back; the phone decrypts and shows them, approves (signed), and the gateway gets
// the decision. Then no word of that turn may be in relayd's SQLite files or its log.
//
//   cd tests/interop && npm ci && RELAYD=$PWD/../../build/relayd node --test --test-reporter=spec
//
// SOPHON_BRIDGE_NODE=/path/to/node runs the authors' client under another Node than the test's
// (README.md: how it was run under Debian 12's Node 18).
import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { spawnSync } from 'node:child_process';
import { createHmac, hkdfSync } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import nacl from 'tweetnacl';
import { Relay, WAIT, launch, newPage, screenshot, signIn, waitFor } from '../browser/lib.js';
import { OpenClawStandIn, defaultScript } from './openclaw_standin.js';
import { BUILD, SophonBridge, build, verifyVendor } from './sophon_bridge.js';

let relay;
let gateway;
let bridge;
let browser;
let page;
let user;
let script;
let second;           // the stopped turn's script
let authors;            // the authors' compiled modules: crypto.js, sas-emojis.js
let sessionId;
let fileIdx;           // the blind index of the file the tool read
let fileKey;           // its blob key, from the bridge's own session key
let webDevice;          // the phone's device row
let bridgeDevice;       // the bridge's device row
const decisionRequests = [];
// The steps build on each other: each one says which step it needs, instead of failing somewhere
// in its middle.
let reached = 0;
const needs = (step) => assert.ok(reached >= step, `step ${step} did not pass`);
const USER_TEXT = 'Please summarise the tangerine ledger for Ottoline before the gondola leaves';
const LEDGER = 'persimmon 12\nloquat 7\nmedlar 3\n';
const SECOND_TEXT = 'Then tally the quince inventory for Bartholomew';

// A device row's id (GET /v1/me/devices).
const idOf = (d) => d.id ?? d.device_id;

before(async () => {
  const problems = verifyVendor();
  assert.deepEqual(problems, [], 'the vendored client is byte for byte the pinned commit');
  build();
  const dist = (name) => import(pathToFileURL(join(BUILD, 'dist', name)).href);
  authors = { crypto: await dist('crypto.js'), sas: await dist('sas-emojis.js') };
  relay = await new Relay().start();
  user = relay.token('alice');
  gateway = await new OpenClawStandIn({ script: null }).start();
  browser = await launch();
  page = await newPage(browser, relay);
  page.on('request', (req) => {
    if (req.method() === 'POST' && /\/v1\/me\/approvals\//.test(req.url())) {
      decisionRequests.push({ url: req.url(), headers: req.headers(), body: req.postDataJSON() });
    }
  });
});

after(async () => {
  if (page) await screenshot(page, 'interop-last').catch(() => {});
  await browser?.close();
  await bridge?.close();
  await gateway?.close();
  await relay?.close();
});

test('the authors\' bridge pairs with relayd through the 7-letter code the phone claims', async () => {
  needs(0);
  bridge = new SophonBridge({ relayUrl: relay.url, gatewayUrl: gateway.url, gatewayToken: gateway.token,
    node: process.env.SOPHON_BRIDGE_NODE || process.execPath });
  script = defaultScript(join(bridge.dir, 'ledger.txt'));
  writeFileSync(join(bridge.dir, 'ledger.txt'), LEDGER);
  // A second turn, with ids of its own, is stopped while its approval is pending.
  second = defaultScript(join(bridge.dir, 'ledger.txt'));
  second.before = ['Counting ', 'the quince ', 'inventory ', 'now.'];
  gateway.script = [script, second];
  bridge.start();

  const started = await bridge.event('pairing_started');
  assert.match(started.code, /^[A-Z]{7}$/);
  assert.equal(started.connector, 'openclaw');
  assert.ok(started.ttl_sec > 60 && started.ttl_sec <= 120, `the code lives about 120 s (ttl_sec ${started.ttl_sec}, from expires_at in ms)`);

  await signIn(page, relay);
  await page.goto(`${relay.url}/pair?code=${started.code}`);
  await page.waitForSelector('#pair-code');
  assert.equal(await page.inputValue('#pair-code'), started.code);
  await page.click('form button[type="submit"]');
  await page.waitForSelector('.pair-result .success', { timeout: WAIT });

  const claimed = await bridge.event('pairing_claimed');
  assert.match(claimed.installation_id, /^inst_/);
  await bridge.event('ready', 30000);
  assert.equal(gateway.connects.length >= 1, true, 'the bridge did the gateway\'s handshake');
  assert.equal(gateway.connects[0].auth.token, gateway.token);
  // The Node the client runs on, as it tells the gateway (README.md: Node 18).
  const version = spawnSync(bridge.node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  assert.equal(gateway.connects[0].client.platform, `node${version.slice(1).split('.')[0]}-${process.platform}`);
  console.log(`the authors' client ran on Node ${version}`);
  // It registers its X25519 key as a device once its socket is open.
  await bridge.logged(/\[bridge\] registered as device dev_/, 20000);
  const creds = bridge.credentials();
  assert.match(creds.bridgePubkeyHex, /^[0-9a-f]{64}$/);
  await waitFor('the bridge device in the user\'s devices', async () => {
    const { devices } = await relay.api('GET', '/v1/me/devices', user);
    bridgeDevice = devices.find((d) => d.platform === 'bridge' && d.pubkey === creds.bridgePubkeyHex);
    return bridgeDevice;
  });
  assert.equal(bridgeDevice.installation_id, claimed.installation_id);
  reached = 1;
});

test('the phone shows the same emoji as the authors\' code computes on the bridge\'s side, and the user confirms them', async () => {
  needs(1);
  const creds = bridge.credentials();
  await waitFor('the phone\'s device', async () => {
    const { devices } = await relay.api('GET', '/v1/me/devices', user);
    webDevice = devices.find((d) => d.platform === 'web');
    return webDevice;
  });
  // What the bridge would show: the authors' deriveSASFromECDH with the bridge's secret key
  // (its credentials.json) and the phone's public key, through their emoji table.
  const expected = authors.sas.sasToEmojis(authors.crypto.deriveSASFromECDH(
    Uint8Array.from(Buffer.from(creds.bridgeSecretHex, 'hex')), Uint8Array.from(Buffer.from(webDevice.pubkey, 'hex'))));
  await page.goto(`${relay.url}/#/verify/${encodeURIComponent(idOf(bridgeDevice))}`);
  const shown = await waitFor('the SAS on the phone', async () => {
    const el = await page.$('ol.sas');
    return el && el.getAttribute('data-sas');
  });
  assert.equal(shown, expected, 'the phone and the authors\' bridge derive the same four emoji');
  assert.equal((await page.innerText('ol.sas')).replace(/\s+/g, ' ').trim(), expected, 'and the phone shows them');
  await screenshot(page, 'interop-sas');
  await page.click('button:has-text("They match")');
  // Without a code from the machine (the authors' bridge shows none, and takes the relay's word), the
  // Verify screen stores the confirmation, then stays and names what our relay-bridge's owner would run
  // (docs/web.md); it navigates nowhere afterwards, so the tests after this one may.
  await page.waitForSelector('main .success', { timeout: WAIT });
  await waitFor('the bridge confirmed by the phone', async () => {
    const r = await fetch(`${relay.url}/v1/me/devices`, { headers: { Authorization: `Bearer ${user}`, 'X-Relay-Device': idOf(webDevice) } });
    const mine = (await r.json()).result.devices.find((d) => idOf(d) === idOf(bridgeDevice));
    return mine && mine.confirmed_by_me === true;
  });
  reached = 2;
});

async function lastAgentText() {
  return page.$$eval('.msg-agent .msg-body', (els) => (els.length ? els[els.length - 1].innerText.trim() : ''));
}

test('one encrypted turn: the message, the streamed reply, a task and an approval, decrypted on the phone; the signed decision reaches the gateway', async () => {
  needs(2);
  // The machines screen's "New chat" link, followed (the screen redraws as the bridge's health
  // changes, which can detach the link under a click).
  await page.goto(`${relay.url}/#/new/${encodeURIComponent(bridgeDevice.installation_id)}`);
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sessionId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  assert.match(sessionId, /^ses_/);
  const { sessions } = await relay.api('GET', '/v1/me', user);
  assert.equal(sessions.find((s) => s.id === sessionId).encrypted, true, 'a chat with a bridge that has a device is encrypted');
  // The bridge holds the session's key from the phone's wrap before the first message.
  await bridge.logged(new RegExp(`session_key_granted ${sessionId} stored`));

  await page.fill('.composer-input', USER_TEXT);
  await page.click('button[aria-label="Send"]');

  // The gateway got the plaintext: the bridge decrypted the phone's message.
  await gateway.until(() => gateway.chats.length === 1);
  assert.equal(gateway.chats[0].message, USER_TEXT);
  assert.equal(gateway.chats[0].sessionKey, sessionId);

  // The reply streams in, decrypted by the phone.
  await waitFor('the streamed start of the reply', async () => (await lastAgentText()).includes(script.before.join('').trim()));

  // The tool call, done, with its arguments and result decrypted (behind the card's disclosures).
  const taskSel = `[data-task-id="${script.tool.toolCallId}"]`;
  await waitFor('the task, done, on the phone', async () => {
    const el = await page.$(`${taskSel}.task-completed`);
    const text = el && (await el.evaluate((e) => e.textContent));
    return text && text.includes(script.tool.result) && text.includes(script.tool.args.path) ? text : null;
  });
  // The approval card shows the decrypted details; the user approves once.
  const card = await waitFor('the approval card', () => page.$('.approval-pending'));
  assert.match(await card.innerText(), /lighthouse-polish --verbose/);
  await screenshot(page, 'interop-approval');
  await (await card.$('button[data-choice="once"]')).click();

  await gateway.until(() => gateway.decisions.length === 1);
  assert.deepEqual({ id: gateway.decisions[0].id, decision: gateway.decisions[0].decision },
    { id: script.approval.approvalId, decision: 'allow-once' });

  // The decision the phone sent carries our extension's signature, which the bridge's key
  // verifies (the authors' client ignores it; our relay-bridge refuses a decision without it).
  assert.equal(decisionRequests.length, 1);
  const sent = decisionRequests[0].body;
  const deviceId = sent.device_id || decisionRequests[0].headers['x-relay-device'];
  assert.equal(deviceId, idOf(webDevice));
  const shared = nacl.box.before(Uint8Array.from(Buffer.from(webDevice.pubkey, 'hex')),
    Uint8Array.from(Buffer.from(bridge.credentials().bridgeSecretHex, 'hex')));
  const k = Buffer.from(hkdfSync('sha256', shared, new Uint8Array(0), Buffer.from('relay/v1/decision'), 32));
  const sep = Buffer.from([0xff]);
  const mac = createHmac('sha256', k).update(Buffer.concat([Buffer.from('relay/v1/decision'), sep,
    Buffer.from(script.approval.approvalId), sep, Buffer.from(sessionId), sep, Buffer.from(sent.decision), sep,
    Buffer.from(sent.scope || ''), sep, Buffer.from(deviceId)])).digest('base64');
  assert.equal(sent.decision_sig, mac, 'decision_sig is the HMAC only the phone and the bridge can compute');

  // The rest of the reply, after the decision.
  await waitFor('the end of the reply', async () => (await lastAgentText()).includes('the harpsichord sparkles'));
  await gateway.until(() => gateway.finished.length === 1);
  await screenshot(page, 'interop-turn');
  assert.deepEqual(gateway.unknown, [], 'the bridge asked the gateway nothing it does not implement');
  reached = 3;
});

test('stopping a turn while its approval is pending: the gateway gets chat.abort, the phone keeps what streamed', async () => {
  needs(3);
  await page.fill('.composer-input', SECOND_TEXT);
  await page.click('button[aria-label="Send"]');
  await gateway.until(() => gateway.chats.length === 2);
  assert.equal(gateway.chats[1].message, SECOND_TEXT);
  const card = await waitFor('the second approval card', async () => {
    const el = await page.$('.approval-pending');
    return el && (await el.innerText()).includes('lighthouse-polish') ? el : null;
  });
  assert.ok(card);
  await waitFor('the second reply streaming', async () => (await lastAgentText()).includes('quince inventory now.'));
  await page.click('button[aria-label="Stop the reply"]');
  await gateway.until(() => gateway.aborts.length === 1);
  assert.deepEqual(gateway.aborts[0], { sessionKey: sessionId }, 'the bridge stops every run of the chat');
  await gateway.until(() => gateway.finished.length === 2);
  assert.equal(gateway.finished[1].decision, 'aborted');
  assert.equal(gateway.decisions.length, 1, 'no decision was sent for the stopped turn\'s approval');
  await waitFor('the reply ended', async () => (await page.$('button[aria-label="Stop the reply"]')) === null
    || (await page.$eval('button[aria-label="Stop the reply"]', (b) => b.hidden)));
  assert.match(await lastAgentText(), /Counting the quince inventory now\./);
  await screenshot(page, 'interop-stopped');
  reached = 4;
});

test('the file the tool read is listed for the session, under the blind index and sealed path the bridge made', async () => {
  needs(3);
  // The bridge's own key of the session (its session-keys.json), and the authors' derivations.
  const keys = JSON.parse(readFileSync(join(bridge.config, 'session-keys.json'), 'utf8')).keys;
  const sessionKey = Uint8Array.from(Buffer.from(keys[sessionId], 'hex'));
  const { realpathSync } = await import('node:fs');
  const real = realpathSync(script.tool.args.path);
  const idx = authors.crypto.blindIndex(authors.crypto.deriveBlindIndexKey(sessionKey), 'agent_files', sessionId, real);
  const files = await waitFor('the file in the session\'s files', async () => {
    const r = await relay.api('GET', `/v1/me/sessions/${sessionId}/files`, user);
    return r.files && r.files.length ? r.files : null;
  });
  const row = files.find((f) => f.path_blind_idx === idx);
  assert.ok(row, `a row under the blind index ${idx}: ${JSON.stringify(files)}`);
  assert.equal(row.tool, 'read');
  fileIdx = idx;
  fileKey = authors.crypto.deriveBlobKey(sessionKey, `agent_files/${sessionId}/${idx}`);
  const open = (ct) => new TextDecoder().decode(authors.crypto.decryptSymmetric(Uint8Array.from(Buffer.from(ct, 'base64')), fileKey));
  assert.equal(open(row.path_ct), real);
  assert.equal(open(row.display_name_ct), 'ledger.txt');
  reached = 5;
});

test('relayd\'s requests to the bridge: its version, the gateway\'s models, a model change, the file read back sealed', async () => {
  needs(5);
  const me = await relay.api('GET', '/v1/me', user);
  const inst = me.installations.find((i) => i.id === bridgeDevice.installation_id);
  assert.equal(inst.bridge_version, '0.13.7', 'the hello frame\'s version');

  const { models } = await relay.api('GET', `/v1/me/installations/${bridgeDevice.installation_id}/models`, user);
  assert.deepEqual(models, [{ id: 'standin-1', name: 'Stand-in 1', provider: 'standin' }], 'models.list.req → OpenClaw models.list');

  await relay.api('PATCH', `/v1/me/sessions/${sessionId}`, user, { model: 'standin-1' });
  await gateway.until(() => gateway.patches.some((p) => p.key === sessionId && p.model === 'standin-1'));

  const read = await relay.api('GET', `/v1/me/sessions/${sessionId}/files/${encodeURIComponent(fileIdx)}`, user);
  assert.equal(read.encrypted, true);
  assert.equal(read.size_bytes, Buffer.byteLength(LEDGER));
  assert.equal(read.mime_type, 'text/plain');
  const bytes = authors.crypto.decryptSymmetric(Uint8Array.from(Buffer.from(read.base64, 'base64')), fileKey);
  assert.equal(new TextDecoder().decode(bytes), LEDGER, 'the file, sealed by the bridge for the phone');
  reached = 6;
});

test('relayd answered every call the authors\' bridge made with a success', async () => {
  needs(3);
  // relayd logs each request with its route and status; the bridge's are the pairing and
  // /v1/bridge/ routes (the bridge only logs a refused call, and goes on).
  const requests = relay.log.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    .filter((r) => r.msg === 'request' && /^\/v1\/(bridge|pairing)\//.test(r.route || ''));
  const routes = new Set(requests.map((r) => r.route));
  for (const route of ['/v1/pairing/start', '/v1/pairing/poll', '/v1/bridge/devices', '/v1/bridge/sendMessage',
    '/v1/bridge/sendMessageDelta', '/v1/bridge/sendMessageEnd', '/v1/bridge/createTask', '/v1/bridge/updateTask',
    '/v1/bridge/finishTask', '/v1/bridge/requestApproval', '/v1/bridge/notifyToolFile']) {
    assert.ok(routes.has(route), `the bridge called ${route} (called: ${[...routes].join(', ')})`);
  }
  const refused = requests.filter((r) => r.status >= 400).map((r) => `${r.method} ${r.route} → ${r.status}`);
  assert.deepEqual(refused, []);
  assert.doesNotMatch(bridge.stderr, /failed|errored/, 'the bridge logged no failure');
  reached = 7;
});

function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

test('no word of the turn is in relayd\'s SQLite file, its WAL or its log', async () => {
  needs(3);
  const words = new Set();
  const add = (text) => { for (const w of String(text).match(/[A-Za-z]{6,}/g) || []) words.add(w); };
  add(USER_TEXT);
  add(SECOND_TEXT);
  add(LEDGER);
  for (const d of second.before) add(d);
  for (const d of script.before) add(d);
  add(script.after.approved);
  add(script.tool.progress);
  add(script.tool.result);
  add(script.approval.title);
  add(script.approval.command);
  add(script.approval.message);
  add('ledger.txt');
  assert.ok(words.size >= 15, `enough words to look for (${[...words].join(' ')})`);

  const search = (label) => {
    const files = filesUnder(relay.data).filter((f) => !f.endsWith('.lock'));
    assert.ok(files.some((f) => /\.db$|\.sqlite3?$/.test(f)), `${label}: relayd's SQLite file is there (${files.join(', ')})`);
    const blobs = files.map((f) => ({ f, bytes: readFileSync(f) }));
    blobs.push({ f: 'relayd log', bytes: Buffer.from(relay.log.join('')) });
    // The search itself must be able to find things: ids relayd stores in clear are found.
    assert.ok(blobs.some(({ bytes }) => bytes.includes(sessionId)), `${label}: the session id is found in relayd's files`);
    const found = [];
    for (const w of words) for (const { f, bytes } of blobs) if (bytes.includes(w)) found.push(`${w} in ${f}`);
    assert.deepEqual(found, [], `${label}: plaintext of the turn in relayd's files`);
    return files;
  };
  const running = search('while relayd runs');
  assert.ok(running.some((f) => f.endsWith('-wal')) || !existsSync(`${running[0]}-wal`), 'the WAL, when there is one, was searched');
  await relay.stop();
  search('after relayd stopped');
  // And the words really were on the phone: the search looks for what the turn showed.
  const body = await page.innerText('body');
  assert.ok(body.includes('harpsichord'), 'the phone shows the turn');
  reached = 8;
});
