// What a session changed: the Files view (issue 40, item 2; docs/web.md "Files").
//
// A real relayd, the real relay-bridge running tests/browser/files_agent.py
// (an ACP agent) in a folder of its own (--cwd), and the page as a 360 px
// phone. The agent writes notes.md, edits it twice (the second time by a
// snippet), writes todo.txt and three more files. In a plain chat the Files
// view lists them from the tool calls and the bridge's reports (in clear),
// with the combined diff, and reads notes.md through the bridge by its path
// (POST /v1/me/sessions/:id/files/read). In an encrypted chat it also
// reads each file through the bridge (sealed): notes.md as changed on disk
// since, a binary logo.png (said, not shown), a 2 MB big.log (its size and
// the start on demand) and link.txt, made a link out of the folder, which
// the bridge refuses.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { mkdirSync, writeFileSync, rmSync, symlinkSync, readFileSync } from 'node:fs';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, ROOT, verifyWithCode } from './lib.js';

const AGENT = `acp:python3 ${join(ROOT, 'tests', 'browser', 'files_agent.py')}`;
const PHONE_360 = { width: 360, height: 740 };
const NOTES = Array.from({ length: 8 }, (_, i) => `line ${i + 1} of the notes\n`).join('')
  .replace('line 2 of the notes\n', 'line 2 of the notes, rewritten\n')
  .replace('line 7 of the notes', 'line 7 of the notes, edited a second time');
const NAMES = ['big.log', 'link.txt', 'logo.png', 'notes.md', 'todo.txt'];

let relay;
let browser;
let bridge;
let token;
let page;
let work;
let outside;
let plainId;
let sealedId;
const problems = [];
const idOf = (d) => d.device_id || d.id;

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  work = join(relay.dir, 'project');
  outside = join(relay.dir, 'secret.txt');
  mkdirSync(work);
  writeFileSync(outside, 'not for the agent\n');
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('build-box');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  const installationId = await pairing.done;
  bridge.run(AGENT, ['--cwd', work]);
  const bridgeDevice = idOf(await waitFor('the bridge device key', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'bridge')));
  page = await newPage(browser, relay, PHONE_360);
  await signIn(page, relay);
  plainId = (await relay.api('POST', '/v1/me/sessions', token, { installation_id: installationId, title: 'Plain files' })).session_id;
  const web = await waitFor('the web device', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'web'));
  await waitFor('relay-bridge showing the emoji', () => bridge.log.join('').includes(`device ${idOf(web)} (`));
  await verifyWithCode(page, relay, bridgeDevice, pairing.enrol_code);
  await waitFor('the bridge accepting the device', () => new RegExp(`device ${idOf(web)} .*shared the keys`).test(bridge.log.join('')));
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await page.fill('#new-title', 'Sealed files');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sealedId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
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

// The turn played in a chat; the header's Files button counts what it touched; the view lists it.
async function playAndOpenFiles(id) {
  await page.goto(`${relay.url}/#/s/${id}`);
  await page.fill('.composer-input', 'files');
  await page.click('button[aria-label="Send"]');
  await waitFor('the end of the turn', async () => (await page.innerText('.timeline')).includes('Done: two files and three more.'));
  await waitFor('the Files button counting five files', async () =>
    (await page.getAttribute('.chat-header .files-button', 'aria-label')) === 'Files the agent touched: 5');
  await page.click('.chat-header .files-button');
  await page.waitForURL(new RegExp(`#/files/${id}$`));
  await waitFor('five files listed', async () => (await page.$$('.file-card')).length === 5);
  const names = await page.$$eval('.file-card .file-name', (els) => els.map((e) => e.textContent));
  assert.deepEqual([...names].sort(), NAMES);
}

const card = (name) => `.file-card[data-path$="/${name}"]`;

async function openCard(name) {
  await page.click(`${card(name)} > summary`);
  await page.waitForSelector(`${card(name)} .file-body`);
}

// The combined diff of notes.md: one part, a new file, three edits, both later changes in it.
async function checkNotesDiff() {
  await openCard('notes.md');
  const body = card('notes.md');
  assert.match(await page.innerText(`${body} .file-changes .file-note`), /^3 edits, combined\.$/);
  assert.equal((await page.$$(`${body} .file-changes .diff`)).length, 1, 'one combined diff');
  assert.match(await page.innerText(`${body} .diff-head`), /New file/);
  const added = await page.$$eval(`${body} .diff-add .diff-code`, (els) => els.map((e) => e.textContent.replace(/^Added: /, '')));
  assert.deepEqual(added, NOTES.trimEnd().split('\n'), 'the file as the session left it, every line added');
  assert.equal((await page.$$(`${body} .diff-del`)).length, 0);
}

test('a plain chat: the files from the tool calls and the reports, the combined diff, and the content read by path', async () => {
  await playAndOpenFiles(plainId);
  // What the relay holds of them is in clear, as the chat is: the bridge reported each by its real path.
  const listed = (await relay.api('GET', `/v1/me/sessions/${plainId}/files`, token)).files;
  assert.deepEqual(listed.map((f) => f.display_name).sort(), NAMES);
  assert.ok(listed.every((f) => f.path.endsWith(`/project/${f.display_name}`) && !('path_blind_idx' in f)), JSON.stringify(listed));
  await checkNotesDiff();
  assert.ok(!(await page.innerText('main')).includes('encrypted chats'), 'no note that reading needs an encrypted chat');
  assert.match(await page.innerText(`${card('todo.txt')} .file-tools`), /Written/);

  // The machine's file changed after the turn: read as it is now, in clear, by its path.
  writeFileSync(join(work, 'notes.md'), `${NOTES}line 9, plain and new\n`);
  const asked = [];
  page.on('request', (r) => { if (r.url().includes('/files/read')) asked.push(r.postDataJSON()); });
  await page.click(`${card('notes.md')} .file-read`);
  await page.waitForSelector(`${card('notes.md')} .file-text`);
  assert.equal(await page.textContent(`${card('notes.md')} .file-text`), `${NOTES}line 9, plain and new\n`);
  assert.equal(asked.length, 1);
  assert.ok(asked[0].path.endsWith('/project/notes.md'), JSON.stringify(asked));
  writeFileSync(join(work, 'notes.md'), NOTES);
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.$eval(`${card('notes.md')} .file-current`, (el) => { const box = el.closest('.files'); box.scrollTop += el.getBoundingClientRect().top - box.getBoundingClientRect().top; });
    await screenshot(page, `files-360-${scheme}-plain-read`);
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), 360);
  }
  await page.emulateMedia({ colorScheme: 'light' });
  assert.deepEqual(await axe(page), []);
  problems.push(...page.problems.splice(0));
});

test('an encrypted chat: the same list and diff, and each file read through the bridge, sealed', async () => {
  await playAndOpenFiles(sealedId);
  // What the relay holds of them is sealed: no path, no name in the list it serves.
  const listed = (await relay.api('GET', `/v1/me/sessions/${sealedId}/files`, token)).files;
  assert.equal(listed.length, 5);
  assert.ok(!JSON.stringify(listed).includes('notes.md'));
  await checkNotesDiff();

  // The machine's file changed after the session: the view reads it as it is now.
  writeFileSync(join(work, 'notes.md'), `${NOTES}line 9, added on the machine\n`);
  writeFileSync(join(work, 'logo.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]));
  writeFileSync(join(work, 'big.log'), 'first line of a large log\n'.padEnd(2 * 1024 * 1024, 'x'));
  rmSync(join(work, 'link.txt'));
  symlinkSync(outside, join(work, 'link.txt'));

  await page.click(`${card('notes.md')} .file-read`);
  await page.waitForSelector(`${card('notes.md')} .file-text`);
  assert.equal(await page.textContent(`${card('notes.md')} .file-text`), `${NOTES}line 9, added on the machine\n`);
  await screenshot(page, 'files-360-light-notes');

  await openCard('logo.png');
  await page.click(`${card('logo.png')} .file-read`);
  await waitFor('the binary said', async () => /A binary file of 16 B: not shown as text\./.test(await page.innerText(card('logo.png'))));
  assert.equal(await page.$(`${card('logo.png')} .file-text`), null, 'no bytes shown as text');

  await openCard('big.log');
  await page.click(`${card('big.log')} .file-read`);
  await waitFor('the size said', async () =>
    (await page.innerText(card('big.log'))).includes('This file is 2.0 MB; the machine sends only its first 1.5 MB.'));
  await page.$eval(card('logo.png'), (el) => { el.closest('.files').scrollTop = el.offsetTop - el.closest('.files').offsetTop; });
  await screenshot(page, 'files-360-light-binary-large');
  await page.click(`${card('big.log')} .file-show-start`);
  const start = await page.textContent(`${card('big.log')} .file-text`);
  assert.ok(start.startsWith('first line of a large log'));
  assert.equal(start.length, 64 * 1024, 'the first 64 KiB drawn at once');
  await page.click(`${card('big.log')} button:has-text("Show all of it")`);
  assert.equal((await page.textContent(`${card('big.log')} .file-text`)).length, 1536 * 1024);

  await openCard('link.txt');
  await page.click(`${card('link.txt')} .file-read`);
  await page.waitForSelector(`${card('link.txt')} .file-refused`);
  assert.equal(await page.getAttribute(`${card('link.txt')} .file-refused`, 'data-code'), 'forbidden');
  assert.match(await page.innerText(`${card('link.txt')} .file-refused`), /The machine refused to read it: the file is outside the folder the agent works in/);
  assert.ok(!(await page.innerText('main')).includes('not for the agent'));
  assert.equal(readFileSync(outside, 'utf8'), 'not for the agent\n');
  assert.deepEqual(await axe(page), []);
  problems.push(...page.problems.splice(0));
});

test('screenshots of the Files view at 360 px, light and dark', async () => {
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.goto(`${relay.url}/#/s/${sealedId}`);
    await page.waitForSelector('.chat-header .files-button');
    await screenshot(page, `files-360-${scheme}-chat-header`);
    await page.goto(`${relay.url}/#/files/${sealedId}`);
    await waitFor('five files listed', async () => (await page.$$('.file-card')).length === 5);
    await screenshot(page, `files-360-${scheme}-list`);
    await openCard('notes.md');
    await page.click(`${card('notes.md')} .file-read`);
    await page.waitForSelector(`${card('notes.md')} .file-text`);
    await openCard('link.txt');
    await page.click(`${card('link.txt')} .file-read`);
    await page.waitForSelector(`${card('link.txt')} .file-refused`);
    await page.$eval(card('notes.md'), (el) => { el.closest('.files').scrollTop = el.offsetTop - el.closest('.files').offsetTop; });
    await screenshot(page, `files-360-${scheme}-notes`);
    await page.$eval(card('link.txt'), (el) => { el.closest('.files').scrollTop = el.offsetTop - el.closest('.files').offsetTop; });
    await screenshot(page, `files-360-${scheme}-refused`);
    // Nothing sideways on a phone but inside the diff and the text.
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), 360);
  }
  // Two panes on a wide screen: the view in the chat's place, its back button kept.
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.emulateMedia({ colorScheme: 'light' });
  await page.goto(`${relay.url}/#/s/${sealedId}`);
  await page.click('.chat-header .files-button');
  await waitFor('five files listed', async () => (await page.$$('.file-card')).length === 5);
  await openCard('notes.md');
  assert.ok(await page.isVisible('.files-back'));
  await screenshot(page, 'files-1280-light-notes');
  problems.push(...page.problems.splice(0));
});
