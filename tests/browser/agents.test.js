// Issue 36 items 1-3 in the web app (docs/web.md "Agents, folders and modes").
//
// A real relayd and a real relay-bridge running two named agents, both the
// ACP test agent tests/e2e/acp_agent.py (`main`, the default, and `second`),
// with a root folder holding two git repositories (alpha on main, beta on
// dev). The page is a 360 px phone whose device the bridge has accepted, so
// the machine's lists come sealed to it and its chats are encrypted:
// - New chat: the agent picker (default preselected), the folder picker
//   from the sealed projects list, a new worktree on a new branch; the relay
//   sees the agent's name and a sealed project_ct, never the folder;
// - the chat's bar: agent, folder and branch; the mode picker, a change
//   signed (config_sig) and taken by the agent, the high-risk value's
//   confirmation (cancelled, then confirmed), a second page following each
//   change through session_state (the agent run with --config: mode ask,
//   code, plan, bypassPermissions, which the bridge marks high risk);
// - a refused folder (an unknown project, a worktree branch the bridge
//   refuses) said plainly on the chat, the composer off; a device the
//   machine has not accepted told why it gets no folders;
// - the agent's sessions: one begun "at the desk" (a session file in the
//   agent's --state, in beta) listed under Continue a session and
//   continued by session/load, its replayed history shown as earlier.
// Screenshots at 360 px, light and dark, of each new screen.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { mkdirSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { Relay, Bridge, launch, newPage, signIn, screenshot, axe, waitFor, ROOT, verifyWithCode, WAIT } from './lib.js';

const AGENT_PY = join(ROOT, 'tests', 'e2e', 'acp_agent.py');
const PHONE_360 = { width: 360, height: 740 };

let relay;
let browser;
let bridge;
let token;
let page;
let root;
let state;
let installationId;
let sealedChat;
const problems = [];
const idOf = (d) => d.device_id || d.id;

function git(cwd, ...args) {
  const out = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`git ${args.join(' ')}: ${out.stderr}`);
}

function repo(name, branch) {
  const dir = join(root, name);
  mkdirSync(dir);
  git(dir, 'init', '-q', '-b', branch);
  writeFileSync(join(dir, 'README.md'), `${name}\n`);
  git(dir, '-c', 'user.name=t', '-c', 'user.email=t@example.org', 'add', '.');
  git(dir, '-c', 'user.name=t', '-c', 'user.email=t@example.org', 'commit', '-q', '-m', 'first');
  return dir;
}

// A session begun "at the desk": the ACP test agent keeps its sessions in --state, and lists a file
// written there by hand as one of its own (tests/e2e/acp_agent.py, --sessions).
function deskSession(cwd, text) {
  const id = 'sess_desk0000000001';
  writeFileSync(join(state, `${id}.json`), JSON.stringify({ history: [['user', text], ['agent', `echo: ${text}`]], cwd, title: 'Desk work on beta' }));
  return id;
}

before(async () => {
  relay = await new Relay(['--sse-heartbeat', '1s']).start();
  root = join(relay.dir, 'code');
  state = join(relay.dir, 'agent-state');
  mkdirSync(root);
  mkdirSync(state);
  repo('alpha', 'main');
  repo('beta', 'dev');
  browser = await launch();
  token = relay.token('alice');
  bridge = new Bridge(relay);
  const pairing = await bridge.startPairing('build-box');
  await relay.api('POST', '/v1/me/pairing/claim', token, { code: pairing.code });
  installationId = await pairing.done;
  // Both list their sessions; main continues one by session/load (its history replayed), second by session/resume.
  const spec = `acp:python3 ${AGENT_PY} --state ${state} --config --sessions`;
  bridge.run(`main=${spec} --no-resume`, ['--agent', `second=${spec}`, '--root', root]);
  const bridgeDevice = idOf(await waitFor('the bridge device key', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'bridge')));
  page = await newPage(browser, relay, PHONE_360);
  await signIn(page, relay);
  const web = await waitFor('the web device', async () =>
    (await relay.api('GET', '/v1/me/devices', token)).devices.find((d) => d.platform === 'web'));
  await waitFor('relay-bridge showing the emoji', () => bridge.log.join('').includes(`device ${idOf(web)} (`));
  await verifyWithCode(page, relay, bridgeDevice, pairing.enrol_code);
  await waitFor('the bridge accepting the device', () => new RegExp(`device ${idOf(web)} .*shared the keys`).test(bridge.log.join('')));
  await waitFor('the manifest listing both agents', async () => {
    const me = await relay.api('GET', '/v1/me', token);
    const inst = me.installations.find((i) => i.id === installationId);
    return inst && Array.isArray(inst.agents) && inst.agents.length === 2;
  });
});

after(async () => {
  if (bridge) await bridge.stop();
  if (browser) await browser.close();
  const code = relay ? await relay.close() : 0;
  assert.equal(code, 0, 'relayd exits 0 on SIGTERM');
  assert.equal(relay.sanitizerReport(), null);
  assert.deepEqual(problems, [], 'no script error or CSP report in any page');
});

async function shots(name) {
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await screenshot(page, `agents-360-${scheme}-${name}`);
    assert.equal(await page.evaluate(() => document.documentElement.scrollWidth), 360, `${name}: no sideways scroll`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

const optionTexts = (sel) => page.$$eval(`${sel} option`, (els) => els.map((e) => ({ value: e.value, text: e.textContent, selected: e.selected })));

async function openNewChat() {
  await page.goto(`${relay.url}/#/new/${installationId}`);
  await page.waitForSelector('#new-encryption .pill-lock');
  await waitFor('the folders of the machine', async () => {
    const labels = (await optionTexts('#new-project')).map((o) => o.text);
    return labels.includes('alpha (main)') && labels.includes('beta (dev)');
  });
}

const session = async (id) => (await relay.api('GET', '/v1/me/sessions', token)).sessions.find((s) => s.id === id);

test('New chat: the agent and folder pickers, the lists sealed to this device, the folder sealed in the chat', async () => {
  const answers = [];
  const watch = async (r) => {
    if (r.url().includes('/projects?')) answers.push({ url: r.url(), body: await r.json().catch(() => null) });
  };
  page.on('response', watch);
  await openNewChat();
  page.off('response', watch);
  // The agent picker: the default first and chosen.
  const agents = await optionTexts('#new-agent');
  assert.deepEqual(agents.map((a) => a.value), ['main', 'second']);
  assert.equal(agents[0].selected, true);
  assert.match(agents[0].text, /\(default\)/);
  // The folders came sealed to this device and were opened here.
  assert.ok(answers.length >= 1);
  assert.match(answers[0].url, /device_id=/);
  assert.equal(typeof answers[0].body.result.sealed, 'string', 'the relay carried the list sealed');
  assert.ok(!JSON.stringify(answers[0].body).includes('alpha'), 'no folder name in what the relay carried');
  const folders = await optionTexts('#new-project');
  assert.deepEqual(folders.map((f) => f.text), ["The agent's usual folder", 'alpha (main)', 'beta (dev)']);

  await page.selectOption('#new-agent', 'second');
  await page.selectOption('#new-project', { label: 'beta (dev)' });
  assert.match(await page.textContent('#new-project-hint'), /\/code\/beta$/);
  await page.fill('#new-title', 'Beta work');
  await shots('new-chat');
  assert.deepEqual(await axe(page), []);
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  sealedChat = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  const s = await session(sealedChat);
  assert.equal(s.agent, 'second');
  assert.equal(typeof s.project_ct, 'string');
  assert.ok(!('project' in s) || s.project === null);
  assert.ok(!JSON.stringify(s).includes('beta'), 'the relay holds no folder name');
  await waitFor('the bar naming agent, folder and branch', async () =>
    (await page.textContent('.agent-place')).replace(/\s+/g, ' ').includes('second · beta'));
  assert.equal(await page.textContent('.agent-branch'), 'dev');
  await page.fill('.composer-input', 'hello beta');
  await page.click('button[aria-label="Send"]');
  await waitFor('the reply', async () => (await page.innerText('.timeline')).includes('echo: hello beta'));
  // The bridge opened project_ct (sealed before the chat had its id, session_meta/project) and runs in beta.
  assert.equal((await session(sealedChat)).agent_state.state, 'ready');
  assert.equal(await page.$('.agent-refused:not([hidden])'), null);

  // A new worktree on a new branch: the branch checked as typed, then made by the machine.
  await openNewChat();
  await page.selectOption('#new-project', { label: 'alpha (main)' });
  await page.check('#new-worktree');
  await page.fill('#new-branch', 'bad..name');
  assert.equal(await page.getAttribute('#new-branch', 'aria-invalid'), 'true');
  assert.match(await page.textContent('#new-branch-hint'), /No "\.\."/);
  await shots('new-chat-worktree-invalid');
  await page.fill('#new-branch', 'feature/web');
  assert.equal(await page.getAttribute('#new-branch', 'aria-invalid'), 'false');
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  await waitFor('the bar naming the new branch', async () => (await page.textContent('.agent-branch').catch(() => '')) === 'feature/web');
  assert.match(await page.textContent('.agent-place'), /main · alpha/);
  await page.fill('.composer-input', 'in the worktree');
  await page.click('button[aria-label="Send"]');
  await waitFor('the reply', async () => (await page.innerText('.timeline')).includes('echo: in the worktree'));
  const made = readdirSync(root).filter((n) => n.includes('worktrees'));
  assert.equal(made.length, 1, `one worktree folder beside the repositories: ${readdirSync(root)}`);
  assert.ok(existsSync(join(root, made[0])));
  await shots('chat-bar');
  problems.push(...page.problems.splice(0));
});

test('the mode picker: a change signed and taken, the high-risk value confirmed first, a second page following', async () => {
  await page.goto(`${relay.url}/#/s/${sealedChat}`);
  const mode = '.agent-option[data-kind="mode"]';
  await page.waitForSelector(mode);
  assert.equal(await page.$('.pill-mode'), null, 'the static mode label is gone');
  const values = await optionTexts(mode);
  const risky = values.find((v) => /\(asks nothing\)$/.test(v.text));
  assert.ok(risky, `a value marked high risk among ${JSON.stringify(values)}`);
  const start = values.find((v) => v.selected);
  const calm = values.find((v) => !v.selected && v !== risky);
  assert.ok(calm, 'another value to switch to');

  const posted = [];
  page.on('request', (r) => { if (r.url().endsWith('/config')) posted.push(r.postDataJSON()); });
  const other = await newPage(browser, relay, PHONE_360);
  await signIn(other, relay);
  await other.goto(`${relay.url}/#/s/${sealedChat}`);
  await other.waitForSelector(mode);
  assert.equal(await other.$eval(mode, (e) => e.value), start.value);
  // Its stream open before the change: an event published before it opens is not its to hear.
  await other.waitForSelector('body[data-connection="live"]', { state: 'attached' });

  await page.selectOption(mode, calm.value);
  await waitFor('the agent taking the mode', async () =>
    (await page.$eval(mode, (e) => e.value)) === calm.value && !(await page.$eval(mode, (e) => e.disabled)));
  assert.equal(posted.length, 1);
  assert.deepEqual(posted[0].option, { id: await page.$eval(mode, (e) => e.dataset.option), value: calm.value });
  assert.equal(typeof posted[0].config_sig, 'string', 'signed in an encrypted chat');
  assert.equal(typeof posted[0].ts, 'number');
  assert.ok(posted[0].device_id);
  await waitFor('the second page following', async () => (await other.$eval(mode, (e) => e.value)) === calm.value);

  // The high-risk value asks first; Cancel leaves everything as it was.
  await page.selectOption(mode, risky.value);
  await page.waitForSelector('dialog.dialog');
  assert.match(await page.textContent('dialog.dialog'), /The agent will act without asking you/);
  await shots('bypass-confirm');
  await page.click('dialog.dialog button:has-text("Cancel")');
  await waitFor('the picker back', async () => (await page.$eval(mode, (e) => e.value)) === calm.value);
  assert.equal(posted.length, 1, 'nothing sent on Cancel');
  await page.selectOption(mode, risky.value);
  await page.click('dialog.dialog button:has-text("Switch to")');
  await waitFor('the agent in the high-risk mode', async () =>
    (await page.$eval(mode, (e) => e.value)) === risky.value && !(await page.$eval(mode, (e) => e.disabled)));
  await waitFor('the second page following', async () => (await other.$eval(mode, (e) => e.value)) === risky.value);
  // Back to the first mode: leaving the high-risk one asks nothing.
  await page.selectOption(mode, start.value);
  assert.equal(await page.$('dialog.dialog'), null);
  await waitFor('the agent back', async () => (await other.$eval(mode, (e) => e.value)) === start.value);
  assert.equal(posted.length, 3);
  await shots('mode-picker');
  assert.deepEqual(await axe(page), []);
  problems.push(...page.problems.splice(0), ...other.problems.splice(0));
  await other.context().close();
});

test('a refused folder is said plainly on the chat, and nothing can be sent', async () => {
  // An unknown project, in a plain chat started through the API.
  const unknown = (await relay.api('POST', '/v1/me/sessions', token,
    { installation_id: installationId, title: 'Nowhere', project: { id: 'p_nosuchprojectatall' } })).session_id;
  await page.goto(`${relay.url}/#/s/${unknown}`);
  await page.waitForSelector('.agent-refused:not([hidden])');
  assert.equal(await page.getAttribute('.agent-refused', 'data-code'), 'unknown_project');
  assert.match(await page.textContent('.agent-refused'), /^The machine does not know this project/);
  assert.equal(await page.$eval('.composer-input', (e) => e.disabled), true);
  assert.equal(await page.$('.agent-option'), null, 'no picker on a refused chat');
  await shots('refused');
  assert.deepEqual(await axe(page), []);

  // A worktree branch git refuses, for a real project (its id as the page opened it).
  await openNewChat();
  const alpha = (await optionTexts('#new-project')).find((f) => f.text === 'alpha (main)').value;
  const bad = (await relay.api('POST', '/v1/me/sessions', token,
    { installation_id: installationId, title: 'Bad branch', project: { id: alpha, worktree_branch: '-rf' } })).session_id;
  await page.goto(`${relay.url}/#/s/${bad}`);
  await page.waitForSelector('.agent-refused:not([hidden])');
  assert.equal(await page.getAttribute('.agent-refused', 'data-code'), 'worktree_name_invalid');
  assert.match(await page.textContent('.agent-refused'), /^This branch name cannot be used for a worktree/);

  // The same project in a plain chat: the bar names it from the bridge's agent_state.project.
  const plain = (await relay.api('POST', '/v1/me/sessions', token,
    { installation_id: installationId, title: 'Plain alpha', agent: 'second', project: { id: alpha } })).session_id;
  await page.goto(`${relay.url}/#/s/${plain}`);
  await waitFor('the bar naming the plain chat\'s folder', async () =>
    (await page.textContent('.agent-place').catch(() => '')).replace(/\s+/g, ' ').includes('second · alpha'));
  assert.equal(await page.textContent('.agent-branch'), 'main');
  assert.equal((await session(plain)).agent_state.project.name, 'alpha');
  problems.push(...page.problems.splice(0));

  // A device the machine has not accepted gets no folders (they are sealed to accepted devices only), and
  // is told what to do; its chat still starts, in the agent's usual folder.
  const stranger = await newPage(browser, relay, PHONE_360);
  await signIn(stranger, relay);
  await stranger.goto(`${relay.url}/#/new/${installationId}`);
  // Two round trips to the bridge (with this device, then without): on a loaded machine they take a while.
  // A wait that ends says what the hint showed instead.
  let hint = '';
  await waitFor('the reason the folders are not listed', async () => {
    hint = await stranger.textContent('#new-project-hint');
    return /cannot be listed: the machine sends them only to a device it accepted: verify the machine on this device first\.$/
      .test(hint);
  }, 2 * WAIT).catch((err) => { throw new Error(`${err.message}; the hint said: ${JSON.stringify(hint)}`); });
  assert.deepEqual((await stranger.$$eval('#new-project option', (els) => els.map((e) => e.value))), ['']);
  await stranger.emulateMedia({ colorScheme: 'dark' });
  await screenshot(stranger, 'agents-360-dark-new-chat-unverified');
  problems.push(...stranger.problems.splice(0));
  await stranger.context().close();
});

test('the agent\'s sessions: one begun at the desk listed under Continue a session, continued with its earlier history', async () => {
  const desk = deskSession(join(root, 'beta'), 'hello from the desk');
  await openNewChat();
  await page.selectOption('#new-project', { label: 'beta (dev)' });
  await page.click('button:has-text("Continue a session")');
  await page.waitForSelector('.resume-list:not([hidden])');
  const titles = await page.$$eval('.resume-item .resume-title', (els) => els.map((e) => e.textContent));
  assert.equal(titles[0], 'Start a new session');
  const radios = await page.$$eval('.resume-item input', (els) => els.map((e) => e.value));
  assert.ok(radios.includes(desk), `the desk session ${desk} listed among ${radios}`);
  await shots('agent-sessions');
  assert.deepEqual(await axe(page), []);
  await page.check(`.resume-item input[value="${desk}"]`);
  await page.click('button:has-text("Start chat")');
  await page.waitForSelector('.composer-input');
  const id = decodeURIComponent(new URL(page.url()).hash.split('/')[2]);
  const s = await session(id);
  assert.deepEqual(s.resume, { agent_session_id: desk });
  // The history comes with the first reply: the bridge loads the session when the first message goes.
  await page.fill('.composer-input', 'whoami');
  await page.click('button[aria-label="Send"]');
  await waitFor('the agent answering in the desk session', async () => (await page.innerText('.timeline')).includes(`session ${desk}`));
  await waitFor('the earlier history shown as such', async () =>
    (await page.$$eval('.msg-earlier', (els) => els.map((e) => e.textContent).join(' '))).includes('hello from the desk'));
  assert.match(await page.textContent('.msg-earlier .msg-meta'), /^Earlier, before this chat/);
  assert.ok(!(await page.innerText('.timeline')).includes('[Earlier in this session'), 'the marker line said in words instead');
  await shots('continued');
  problems.push(...page.problems.splice(0));
});
