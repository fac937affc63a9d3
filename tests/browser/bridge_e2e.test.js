// End-to-end encryption between our relay-bridge and our web client (issue 26),
// the browser's half of tests/e2e/test_100_e2e_relay_cli.py: a real relayd, the
// real relay-bridge running examples/echo_agent.py, and the web client in
// headless Chromium as the phone. Nothing here plays either side of the wire:
//
// - the page registers its device; the bridge prints its four emoji, and the
//   page's Verify screen shows the same four before the user confirms;
// - an encrypted chat: the message goes sealed, the agent's reply reads in
//   clear in the page, relayd's files and log hold none of the words;
// - an approval answered in the page carries decision_sig and the agent runs
//   the command; a decision with a forged decision_sig posted straight to the
//   API with the user's token is refused by the bridge and the agent is not told;
// - a second browser confirmed, then revoked from the first page's Settings:
//   after the rotation it cannot read a new message, the first page can.
// The tests run in order and share one relay, one bridge and one account.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Relay, Bridge, BRIDGE, ECHO_AGENT, launch, newPage, signIn, waitFor, sleep, WAIT, filesUnder } from './lib.js';

const LOCKED = 'Waiting for this device to receive the key…';
// The protocol authors' SAS table (their sas-emojis.ts), interop data.
const SAS_EMOJI = ['🐱', '🐶', '🐭', '🐹', '🐰', '🐻', '🐼', '🐨', '🐯', '🦁', '🐮', '🐷', '🐸', '🦊', '🐔', '🐺',
  '🍎', '🍌', '🍇', '🍓', '🍑', '🍒', '🥕', '🌽', '🌙', '⭐', '🌈', '🔥', '⚡', '🚀', '⚓', '🎁'];
// Words that must never reach relayd in clear.
const WORDS = ['zebracorn', 'velociraptor', 'xylophonist', 'quetzalcoatl', 'pterodactyl', 'Tangerine heist'];
// A decision_sig made by no key the bridge knows (test_100's forgery).
const FORGED_SIG = 'H1i7jZB4Tv2bTAyOLx5A9DMV/YJvbrN9iJGAq/wsJek=';

let relay;
let browser;
let bridge;
let token;
let installationId;
let bridgeDevice;
let page;
let webDevice;
let sessionId;
let second;
let secondDevice;
let enrolCode; // the one-time code relay-bridge pair showed
const decisions = []; // the bodies the page posted to /v1/me/approvals/:id
const problems = [];

// relay-bridge as lib.js runs it, with its stdout (what it prints for the user) kept as well.
class TerminalBridge extends Bridge {
  run(agent = ECHO_AGENT) {
    this.out = [];
    this.proc = spawn(BRIDGE, ['run', '--agent', agent], { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (c) => this.out.push(c.toString()));
    this.proc.stderr.on('data', (c) => this.log.push(c.toString()));
    return this;
  }

  text() {
    return this.log.join('');
  }

  waitLog(what, count = 1) {
    return waitFor(`relay-bridge logging "${what}"`, () => this.text().split(what).length - 1 >= count);
  }

  // The emoji the bridge printed for device id: its log line and its stdout line must agree.
  async sasFor(id, label) {
    const logged = await waitFor(`relay-bridge showing the emoji of ${id}`, () => {
      const m = new RegExp(`device ${id} \\([^)]*\\) waits for confirmation: (.+)`).exec(this.text());
      return m && m[1].trim();
    });
    // Off a terminal, relay-bridge prints a JSON line per device waiting (as test_100 reads it).
    const printed = await waitFor(`the device_pending line of ${id} (stdout: ${this.out.join('')})`, () => {
      const lines = this.out.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
      const line = lines.filter((l) => l.event === 'device_pending' && l.device_id === id).pop();
      return line && line.label === label && line.platform === 'web' && line.sas;
    });
    assert.equal(printed, logged);
    return logged;
  }
}

async function webDevices() {
  return (await relay.api('GET', '/v1/me/devices', token)).devices.filter((d) => d.platform === 'web');
}
const idOf = (d) => d.device_id || d.id;

function collect(p) {
  problems.push(...p.problems);
  p.problems.length = 0;
}

async function composerSend(p, text) {
  await p.fill('.composer-input', text);
  await p.click('button[aria-label="Send"]');
}

const agentReplies = (p) => p.$$eval('.msg-agent.msg-final .msg-body', (els) => els.map((e) => e.innerText.trim()));

// The Verify screen of the bridge device in p: the four emoji it shows must be the ones the bridge printed.
// code: the enrolment code relay-bridge showed (issue 34), typed into the screen; without one, the screen
// shows the command the machine's owner runs (the caller runs it, once relay-bridge has it).
async function verify(p, printed, code = null) {
  await p.goto(`${relay.url}/#/verify/${bridgeDevice}`);
  const shown = await waitFor('the SAS on the Verify screen', async () => {
    const el = await p.$('ol.sas[data-sas]');
    return el && el.getAttribute('data-sas');
  });
  assert.equal(shown, printed, 'the page and relay-bridge show the same four emoji');
  const emoji = shown.split(' ');
  assert.equal(emoji.length, 4);
  assert.ok(emoji.every((e) => SAS_EMOJI.includes(e)), shown);
  assert.equal((await p.innerText('ol.sas')).replace(/\s+/g, ' ').trim(), shown);
  if (code) await p.fill('#enrol-code', code);
  await p.click('button:has-text("They match")');
  if (code) await p.waitForURL(/#\/settings$/);
  else await p.waitForSelector('main .success');
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  bridge = new TerminalBridge(relay);
  const pairing = await bridge.startPairing('laptop');
  // The code for the first device that pairing made (issue 34): the pairing link carries it in its fragment.
  enrolCode = pairing.enrol_code;
  assert.match(enrolCode, /^[A-HJ-NP-Z2-9]{4}(-[A-HJ-NP-Z2-9]{4}){4}$/);
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  installationId = await pairing.done;
  bridge.run(ECHO_AGENT);
  const dev = await waitFor('the bridge device key', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'bridge'));
  bridgeDevice = idOf(dev);
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

test('the page registers its device; relay-bridge prints four emoji, the Verify screen shows the same; They match confirms', async () => {
  page = await newPage(browser, relay);
  page.on('request', (req) => {
    if (req.method() === 'POST' && new URL(req.url()).pathname.startsWith('/v1/me/approvals/')) decisions.push(JSON.parse(req.postData()));
  });
  await signIn(page, relay);
  webDevice = await waitFor('the web device', async () => (await webDevices())[0]);
  const printed = await bridge.sasFor(idOf(webDevice), webDevice.label);
  assert.doesNotMatch(bridge.text(), new RegExp(`device ${idOf(webDevice)} \\([^)]*\\) accepted`), 'not accepted before the user confirms');
  // The code typed as relay-bridge showed it: the page sends its proof, the bridge checks it and takes the device.
  await verify(page, printed, enrolCode);
  await bridge.waitLog(`device ${idOf(webDevice)} (`, 2);
  await waitFor('the bridge accepting the device', () => new RegExp(`device ${idOf(webDevice)} \\([^)]*\\) accepted: shared the keys`).test(bridge.text()));
  await page.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="code"]`);
  collect(page);
});

test('an encrypted chat: the reply of the agent reads in clear in the page', async () => {
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await page.fill('#new-title', 'Tangerine heist');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sessionId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  const session = (await relay.api('GET', '/v1/me', token)).sessions.find((s) => s.id === sessionId);
  assert.equal(session.encrypted, true);
  await bridge.waitLog(`session ${sessionId}: key received from device ${idOf(webDevice)}`);
  await composerSend(page, 'hello zebracorn velociraptor');
  await waitFor('the decrypted reply', async () => (await agentReplies(page)).includes('hello zebracorn velociraptor'));
  // What relayd serves is ciphertext.
  const raw = await relay.api('GET', `/v1/me/sessions/${sessionId}/messages`, token);
  assert.ok(!JSON.stringify(raw).includes('zebracorn'));
  assert.ok(raw.messages.some((m) => m.text_ct), 'messages are held as text_ct');
  collect(page);
});

test('an approval answered in the page is signed and the agent runs the command', async () => {
  await composerSend(page, 'run echo xylophonist');
  const card = await page.waitForSelector('.approval-pending');
  await waitFor('the sealed command in clear', async () => (await card.innerText()).includes('echo xylophonist'));
  await page.click('.approval-pending button[data-choice="once"]');
  await waitFor('the agent running it', async () =>
    (await agentReplies(page)).some((t) => t.startsWith('allow-once: ran echo xylophonist')))
    .catch(async (err) => assert.fail(`${err.message}; page: ${await page.innerText('.timeline')}; bridge: ${bridge.text().slice(-1500)}`));
  // The reply's markdown shows the command as code; the task card holds its output.
  assert.ok(await page.$('.msg-agent code:has-text("echo xylophonist")'));
  assert.ok((await page.innerText('.timeline')).includes('Exit code 0'));
  assert.equal(decisions.length, 1);
  assert.equal(decisions[0].decision, 'approve');
  assert.match(decisions[0].decision_sig, /^[A-Za-z0-9+/]{43}=$/, 'the decision carries decision_sig');
  assert.equal(decisions[0].device_id, idOf(webDevice));
  assert.doesNotMatch(bridge.text(), /decision refused/);
  collect(page);
});

test('a decision with a forged decision_sig, posted straight to the API, is refused by the bridge: the agent is not told', async () => {
  await composerSend(page, 'run echo quetzalcoatl');
  await page.waitForSelector('.approval-pending');
  const pending = await waitFor('the pending approval', async () =>
    (await relay.api('GET', '/v1/me/snapshot', token)).pending_approvals.find((a) => a.session_id === sessionId));
  const approvalId = pending.approval_id;
  // relayd cannot tell a forged signature: it takes the decision and passes it on.
  const decided = await relay.api('POST', `/v1/me/approvals/${approvalId}`, token,
    { decision: 'approve', device_id: idOf(webDevice), decision_sig: FORGED_SIG });
  assert.equal(decided.decision, 'approve');
  await bridge.waitLog(`approval ${approvalId} in encrypted session ${sessionId}: decision refused, the agent is not told: decision_sig does not verify`);
  await sleep(1500);
  const replies = await agentReplies(page);
  assert.ok(!replies.some((t) => t.includes('quetzalcoatl')), `the agent ran nothing: ${JSON.stringify(replies)}`);
  assert.equal(decisions.length, 1, 'the page sent no decision of its own');
  collect(page);
});

test('a second browser, confirmed, reads the chat; revoked from the first page, it cannot read a new message', async () => {
  second = await newPage(browser, relay);
  const said = [];
  second.on('console', (msg) => said.push(`${msg.type()}: ${msg.text()}`));
  await signIn(second, relay);
  secondDevice = await waitFor('the second web device', async () => (await webDevices()).find((d) => idOf(d) !== idOf(webDevice)));
  const printed = await bridge.sasFor(idOf(secondDevice), secondDevice.label);
  // Without a code: the page confirms and shows the owner's command; the bridge waits until it is run.
  await verify(second, printed);
  assert.equal(await second.innerText('main .code-box code'), `relay-bridge devices confirm ${idOf(secondDevice)}`);
  await bridge.waitLog(`device_added ${idOf(secondDevice)} (`);
  assert.doesNotMatch(bridge.text(), new RegExp(`device ${idOf(secondDevice)} .*shared the keys`), 'no keys on the relay\'s word');
  // The owner runs it, as the page said.
  const confirmed = spawnSync(BRIDGE, ['devices', 'confirm', idOf(secondDevice), '--yes'], { env: bridge.env(), encoding: 'utf8', timeout: WAIT });
  assert.equal(confirmed.status, 0, confirmed.stderr);
  await waitFor('the bridge accepting the second device', () =>
    new RegExp(`device ${idOf(secondDevice)} confirmed on this machine: shared the keys of 1 sessions`).test(bridge.text()));
  // The machine's signed grant tells the page it took this device.
  await second.goto(`${relay.url}/#/settings`);
  await second.waitForSelector(`.device-item[data-device="${bridgeDevice}"] .bridge-status[data-state="keys"]`);
  // The bridge's grant for the chat is at relayd before the second browser opens it.
  await waitFor('the chat key wrapped for the second browser', async () =>
    (await relay.api('GET', `/v1/me/devices/${idOf(secondDevice)}/keys`, token)).keys.some((k) =>
      k.session_id === sessionId && k.wrapped_by_device_id === bridgeDevice && k.grant_sig));
  await second.goto(`${relay.url}/#/s/${sessionId}`);
  await waitFor('the second browser reading the chat', async () => (await second.innerText('.timeline')).includes('hello zebracorn velociraptor'))
    .catch(async (err) => assert.fail(`${err.message}; console: ${said.join(' | ')}; page: ${await second.innerText('.timeline')}`));

  await page.goto(`${relay.url}/#/settings`);
  await page.click(`.device-item[data-device="${idOf(secondDevice)}"] button:has-text("Revoke")`);
  await page.click('dialog button:has-text("Revoke")');
  await bridge.waitLog(`device ${idOf(secondDevice)} revoked`);
  // The first page made a new key for the chat and granted it to the bridge.
  await bridge.waitLog(`session ${sessionId}: key received from device ${idOf(webDevice)}`, 2);

  await page.goto(`${relay.url}/#/s/${sessionId}`);
  await page.waitForSelector('.composer-input');
  await composerSend(page, 'after the revoke: pterodactyl');
  await waitFor('the first page reading the new reply', async () =>
    (await agentReplies(page)).includes('after the revoke: pterodactyl'));
  const text = await page.innerText('.timeline');
  assert.ok(text.includes('hello zebracorn velociraptor'), 'old messages still read with the older key');

  await second.goto(`${relay.url}/#/s/${sessionId}`);
  await second.reload();
  await waitFor('the new messages locked in the revoked browser', async () => {
    const t = await second.innerText('.timeline');
    return t.includes('hello zebracorn velociraptor') && t.split(LOCKED).length - 1 >= 2 ? t : null;
  });
  await sleep(1000);
  assert.ok(!(await second.innerText('body')).includes('pterodactyl'), 'the revoked browser cannot read the new message');
  collect(page);
  collect(second);
  await second.context().close();
});

test('the pairing link relay-bridge prints carries its code: the page pairs, verifies the machine with it, and the bridge takes the device', async () => {
  const desktop = new TerminalBridge(relay);
  const pairing = await desktop.startPairing('desktop');
  assert.equal(pairing.enrol_link, `${relay.url}/pair?code=${pairing.code}#enrol=${pairing.enrol_code}`);
  await page.goto(pairing.enrol_link);
  await page.waitForSelector('#pair-code');
  assert.doesNotMatch(page.url(), /enrol/i, 'the code left the address bar');
  await page.click('form button[type="submit"]');
  await page.click('.pair-result a:has-text("Verify it")');
  const desktopId = await pairing.done;
  desktop.run(ECHO_AGENT);
  try {
    const printed = await desktop.sasFor(idOf(webDevice), webDevice.label);
    const shown = await waitFor('the SAS of the new machine', async () => {
      const el = await page.$('ol.sas[data-sas]');
      return el && el.getAttribute('data-sas');
    });
    assert.equal(shown, printed, 'the page and the new relay-bridge show the same four emoji');
    assert.equal(await page.inputValue('#enrol-code'), pairing.enrol_code, 'the code the link carried, filled in');
    await page.click('button:has-text("They match")');
    await page.waitForURL(new RegExp(`#/new/${desktopId}$`));
    await waitFor('the new bridge accepting the device', () => new RegExp(`device ${idOf(webDevice)} \\([^)]*\\) accepted`).test(desktop.text()));
    await page.waitForSelector('#new-encryption .pill-lock');
  } finally {
    await desktop.stop();
  }
  collect(page);
});

test('relayd never held a word of the chat in clear: not in its data folder, nor in its log', async () => {
  const files = filesUnder(relay.data);
  assert.ok(files.some((f) => /\.db$/.test(f)), 'the SQLite file is there');
  for (const f of files) {
    const bytes = readFileSync(f);
    for (const w of WORDS) assert.equal(bytes.includes(Buffer.from(w, 'utf8')), false, `${w} in ${f}`);
  }
  const log = relay.log.join('');
  for (const w of WORDS) assert.ok(!log.includes(w), `${w} in relayd's log`);
});
