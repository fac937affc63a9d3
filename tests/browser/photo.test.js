// A photo attached in the composer reaches an ACP agent as an image (issue
// 40, item 3; docs/bridge.md "acp:COMMAND", prompts). The real relay-bridge
// runs our ACP test agent (tests/e2e/acp_agent.py, which writes down every
// prompt it gets); with --images it takes images, as Claude Code and Codex do
// (test_91, test_92 check those). From the page's composer, in a plain chat
// and in an encrypted one (where the page seals the file before it goes up
// and relay-bridge opens it), the agent gets one image block with the very
// bytes. A machine whose agent takes no images: the reply says the photo went
// as a link only. Screenshots at 360 px, light and dark.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Relay, Bridge, launch, newPage, signIn, screenshot, waitFor, PHONE, ROOT, verifyWithCode } from './lib.js';

const ACP = join(ROOT, 'tests', 'e2e', 'acp_agent.py');
const PHOTO = readFileSync(join(ROOT, 'web', 'app', 'icon-192.png'));
const NOTE = '[shot.png reached the agent as a link only: this agent does not take images]';

let relay;
let browser;
let page;
let token;
const bridges = [];
const problems = [];
const idOf = (d) => d.device_id || d.id;

async function machine(name, flags) {
  const bridge = new Bridge(relay);
  bridges.push(bridge);
  const pairing = await bridge.startPairing(name);
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  const installationId = await pairing.done;
  const log = join(relay.dir, `${name}-agent.log`);
  bridge.run(`acp:python3 ${ACP} --state ${join(relay.dir, `${name}-state`)} --log ${log} ${flags}`);
  await waitFor('the agent ready', () => bridge.log.join('').includes('acp agent acp-test-agent 1.0 ready'));
  return { bridge, installationId, enrolCode: pairing.enrol_code, log };
}

// The prompts the agent got, as its log has them.
const prompts = (log) => {
  try {
    return readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.event === 'prompt');
  } catch {
    return [];
  }
};

async function sendPhoto(id, text) {
  await page.goto(`${relay.url}/#/s/${encodeURIComponent(id)}`);
  await page.waitForSelector('.composer-input');
  await page.setInputFiles('#attach-camera', { name: 'shot.png', mimeType: 'image/png', buffer: PHOTO });
  await page.fill('.composer-input', text);
  await page.click('button[aria-label="Send"]');
}

async function shots(name) {
  for (const colorScheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme });
    await screenshot(page, `photo-360-${colorScheme}-${name}`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  browser = await launch();
  token = relay.token('alice');
  page = await newPage(browser, relay, PHONE);
  await signIn(page, relay);
});

after(async () => {
  for (const b of bridges) await b.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error in any page');
});

test('a photo from the composer is an image block with its very bytes, in a plain and in an encrypted chat', async () => {
  const m = await machine('seeing-box', '--images');
  const plain = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: m.installationId, title: 'Plain photo' })).session_id;
  await sendPhoto(plain, 'what is this?');
  const image = (p) => p && p.blocks.find((b) => b.type === 'image');
  const first = await waitFor('the plain prompt with its image', () => image(prompts(m.log)[0]));
  assert.equal(first.mimeType, 'image/png');
  assert.deepEqual(Buffer.from(first.data, 'base64'), PHOTO);
  await waitFor('the reply', async () => (await page.innerText('.timeline')).includes('echo: what is this?'));
  assert.ok(!(await page.innerText('.timeline')).includes('link only'));

  // The machine verified (its enrolment code), an encrypted chat: the page seals the photo, the bridge opens it.
  const bridgeDevice = idOf(await waitFor('the bridge device key', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'bridge')));
  const web = await waitFor('the web device', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'web'));
  await waitFor('relay-bridge showing the emoji', () => m.bridge.log.join('').includes(`device ${idOf(web)} (`));
  await verifyWithCode(page, relay, bridgeDevice, m.enrolCode);
  await waitFor('the bridge accepting the device', () => new RegExp(`device ${idOf(web)} .*shared the keys`).test(m.bridge.log.join('')));
  await page.goto(`${relay.url}/#/new/${m.installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await page.fill('#new-title', 'Sealed photo');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  const sealed = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  assert.equal((await relay.api('GET', '/v1/me', token)).sessions.find((s) => s.id === sealed).encrypted, true);
  await waitFor('the bridge holding the key', () => m.bridge.log.join('').includes(`session ${sealed}: key received`));
  await sendPhoto(sealed, 'and this one?');
  const second = await waitFor('the sealed prompt with its image', () => image(prompts(m.log)[1]));
  assert.deepEqual(Buffer.from(second.data, 'base64'), PHOTO);
  assert.match(second.uri, /^file:\/\//, 'read from the file the bridge opened, not a link of the relay');
  await waitFor('the sealed reply', async () => (await page.innerText('.timeline')).includes('echo: and this one?'));
  await shots('sealed');
  problems.push(...page.problems);
});

test('an agent that takes no images: the reply says the photo went as a link only', async () => {
  const m = await machine('blind-box', '');
  const id = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: m.installationId, title: 'No images' })).session_id;
  await sendPhoto(id, 'can you see it?');
  const got = await waitFor('the prompt', () => prompts(m.log)[0]);
  assert.equal(got.text, 'can you see it?');
  assert.deepEqual(got.blocks.map((b) => [b.type, b.name, b.mimeType]), [['resource_link', 'shot.png', 'image/png']]);
  await waitFor('the note in the reply', async () => (await page.innerText('.timeline')).includes('echo: can you see it?'));
  const reply = await page.locator('.timeline .msg-agent .msg-body').last().innerText();
  assert.ok(reply.startsWith(NOTE), reply);
  await shots('no-images');
  problems.push(...page.problems);
});
