// Issue 36's pure logic in the web client: web/app/agents.js (the agent
// preselected, the option list as pickers, which change asks first, where a
// chat works, refusals in words, the worktree branch rule, what a start
// sends), the config signature as the bridge recomputes it (crypto.js,
// decision.js), a bridge's sealed list answer opened (crypto_box from npm's
// tweetnacl, not the vendored copy), and project_ct sealed and opened
// (sealed.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, hkdfSync, webcrypto } from 'node:crypto';
import npmNacl from 'tweetnacl';

if (!globalThis.crypto) globalThis.crypto = webcrypto;
const a = await import('../../../web/app/agents.js');
const c = await import('../../../web/app/crypto.js');
const d = await import('../../../web/app/decision.js');
const sealed = await import('../../../web/app/sealed.js');

const hex = (s) => Uint8Array.from(Buffer.from(s, 'hex'));
const BRIDGE_SECRET = hex('1111111111111111111111111111111111111111111111111111111111111111');
const BRIDGE_PUBLIC = '7b4e909bbe7ffe44c465a220037d608ee35897d31ef972f07f74892cb0f73f13';
const PHONE_SECRET = hex('2222222222222222222222222222222222222222222222222222222222222222');
const PHONE_PUBLIC = '0faa684ed28867b97f4a6a2dee5df8ce974e76b7018e3f22a1c4cf2678570f20';

const CLAUDE_OPTIONS = [
  { id: 'model', name: 'Model', kind: 'model', value: 'sonnet', values: [{ value: 'sonnet', name: 'Sonnet' }, { value: 'opus', name: 'Opus', description: 'Slower, deeper' }] },
  { id: 'mode', name: 'Mode', kind: 'mode', value: 'default', values: [
    { value: 'default', name: 'Default' }, { value: 'plan', name: 'Plan' }, { value: 'acceptEdits', name: 'Accept edits' },
    { value: 'bypassPermissions', name: 'Bypass permissions', risk: 'high' }] },
  { id: 'effort', kind: 'effort', value: 'high', values: [{ value: 'low' }, { value: 'high' }] },
];

test('agents: the default preselected and first, no picker for one agent, none for an old bridge', () => {
  const inst = { agents: [
    { name: 'codex', kind: 'acp', supports: { session_list: true } },
    { name: 'claude-code', kind: 'acp', default: true, supports: {} },
    { name: 'Bad Name', kind: 'acp' },
  ] };
  const two = a.agentChoices(inst);
  assert.deepEqual(two.agents.map((x) => x.name), ['claude-code', 'codex'], 'default first, a malformed name left out');
  assert.equal(two.chosen, 'claude-code');
  assert.equal(two.show, true);
  assert.equal(two.agents[0].label, 'claude-code', 'the owner\'s name for it, as configured');
  assert.equal(a.agentChoices({ agents: [{ name: 'claude-agent-acp' }] }).agents[0].label, 'Claude Code');
  assert.equal(a.listsSessions(two.agents[1]), true);
  assert.equal(a.listsSessions(two.agents[0]), false);
  const one = a.agentChoices({ agents: [{ name: 'default', kind: 'jsonl', default: true }] });
  assert.equal(one.show, false);
  assert.equal(one.chosen, 'default');
  assert.deepEqual(a.agentChoices({ agent: { name: 'x' } }), { agents: [], chosen: null, show: false });
  assert.deepEqual(a.agentChoices(null), { agents: [], chosen: null, show: false });
});

test('pickers: mode, model, effort in that order, names, risk kept, unusable options left out', () => {
  const model = a.pickerModel([...CLAUDE_OPTIONS,
    { id: 'one', kind: 'select', value: 'x', values: [{ value: 'x' }] }, // no choice
    { kind: 'select', value: 'x', values: [{ value: 'x' }, { value: 'y' }] }, // no id
    { id: 'mode', kind: 'mode', value: 'a', values: [{ value: 'a' }, { value: 'b' }] }, // a second 'mode' id
    { id: 'verbose', kind: 'toggle', value: 'on', values: [{ value: 'on' }, { value: 'off' }, { value: 'on' }, null, { value: '' }] },
  ]);
  assert.deepEqual(model.map((p) => p.id), ['mode', 'model', 'effort', 'verbose']);
  const [mode, mdl, effort, verbose] = model;
  assert.equal(mode.label, 'Mode');
  assert.equal(mode.current, 'Default');
  assert.equal(mode.values.find((v) => v.value === 'bypassPermissions').risk, 'high');
  assert.equal(mode.values.find((v) => v.value === 'plan').risk, null);
  assert.equal(mdl.values[1].description, 'Slower, deeper');
  assert.equal(effort.label, 'Effort', 'a nameless option is named by its kind');
  assert.deepEqual(effort.values.map((v) => v.name), ['low', 'high'], 'a nameless value by itself');
  assert.deepEqual(verbose.values.map((v) => v.value), ['on', 'off'], 'duplicates and empty values dropped');
  // A current value the list lacks is kept, so the picker never shows another one as current.
  const odd = a.pickerModel([{ id: 'model', kind: 'model', value: 'gpt-x', values: [{ value: 'a' }, { value: 'b' }] }]);
  assert.deepEqual(odd[0].values.map((v) => v.value), ['gpt-x', 'a', 'b']);
  assert.equal(odd[0].current, 'gpt-x');
  assert.deepEqual(a.pickerModel(undefined), []);
  assert.deepEqual(a.pickerModel('nope'), []);
});

test('confirmation: only a high-risk value that is not already the current one asks first', () => {
  const [mode] = a.pickerModel(CLAUDE_OPTIONS);
  const q = a.confirmation(mode, 'bypassPermissions');
  assert.ok(q);
  assert.match(q.text, /^The agent will act without asking you/);
  assert.equal(q.confirm, 'Switch to Bypass permissions');
  assert.equal(a.confirmation(mode, 'plan'), null);
  assert.equal(a.confirmation(mode, 'unknown'), null);
  const already = a.pickerModel(CLAUDE_OPTIONS.map((o) => (o.id === 'mode' ? { ...o, value: 'bypassPermissions' } : o)))[0];
  assert.equal(a.confirmation(already, 'bypassPermissions'), null, 'no question for what is already in force');
  assert.equal(a.confirmation(already, 'default'), null, 'leaving it asks nothing');
});

test('place: agent, folder and branch from the bridge in a plain chat, from the opened project_ct in an encrypted one', () => {
  const plain = { agent: 'claude-code', agent_state: { state: 'ready', project: { id: 'p_1', name: 'relay', path: '/src/relay', branch: 'main' } } };
  assert.deepEqual(a.placeOf(plain), { agent: 'claude-code', folder: 'relay', branch: 'main', path: '/src/relay' });
  const sealedChat = { agent: 'codex', agent_state: { state: 'ready' }, project_opened: { id: 'p_1', name: 'relay', path: '/src/relay', branch: 'main', worktree_branch: 'fix/x' } };
  assert.deepEqual(a.placeOf(sealedChat), { agent: 'codex', folder: 'relay', branch: 'fix/x', path: '/src/relay' }, 'the new worktree\'s branch wins');
  assert.equal(a.placeOf({ project_opened: { id: 'p', path: '/home/me/work/site/' } }).folder, 'site', 'a folder named by its path\'s last part');
  assert.deepEqual(a.placeOf({}), { agent: '', folder: '', branch: '', path: '' });
  assert.deepEqual(a.placeOf(null), { agent: '', folder: '', branch: '', path: '' });
});

test('refusals: each code in words with the bridge\'s message, an unknown code said as it came', () => {
  assert.equal(a.refusalOf({ state: 'ready' }), null);
  assert.equal(a.refusalOf(null), null);
  const r = a.refusalOf({ state: 'refused', error: { code: 'folder_outside_roots', message: '/etc is not under a --root' } });
  assert.deepEqual(r, { refused: true, code: 'folder_outside_roots', text: 'This folder is outside the folders the machine allows: /etc is not under a --root' });
  assert.equal(a.refusalOf({ state: 'refused', error: { code: 'not_a_folder' } }).text, 'This is not a folder on the machine.');
  assert.equal(a.refusalOf({ state: 'refused', error: { code: 'odd', message: 'Something else' } }).text, 'Something else');
  assert.equal(a.refusalOf({ state: 'refused', error: { code: 'odd' } }).text, 'The machine refused (odd).');
  const config = a.refusalOf({ state: 'ready', error: { code: 'config_refused', message: 'bad signature' } });
  assert.equal(config.refused, false, 'a refused change leaves the session running');
});

test('worktree branch: what git check-ref-format --branch and the bridge refuse', () => {
  for (const ok of ['feature/x', 'fix-1', 'a.b/c_d', 'release/2026.11']) assert.equal(a.worktreeBranchProblem(ok), null, ok);
  for (const bad of ['', '-x', 'a..b', 'a/../b', 'a b', 'a~1', 'a^', 'a:b', 'a?', 'a*', 'a[b', 'a\\b', '/a', 'a/', 'a//b', 'a.lock',
    'a/.hidden', '.x', 'a.', '@', 'a@{1}', 'tab\there', 'nul\u0000', 'x'.repeat(101)]) {
    assert.notEqual(a.worktreeBranchProblem(bad), null, JSON.stringify(bad));
  }
});

test('start: a plain chat names agent, project, worktree and resume; an encrypted one seals the project', () => {
  const project = { id: 'p_abc', name: 'relay', path: '/src/relay', branch: 'main', agents_used: ['codex'] };
  assert.deepEqual(a.startFields({ agent: 'codex', project, worktree: 'fix/x', resume: 'sess-9' }),
    { agent: 'codex', project: { id: 'p_abc', worktree_branch: 'fix/x' }, resume: { agent_session_id: 'sess-9' } });
  assert.deepEqual(a.startFields({ agent: null, project: null, worktree: '', resume: '' }), {});
  assert.deepEqual(a.sealedProject({ project, worktree: '' }), { id: 'p_abc', name: 'relay', path: '/src/relay', branch: 'main' });
  assert.deepEqual(a.sealedProject({ project, worktree: 'w' }).worktree_branch, 'w');
  assert.equal(a.sealedProject({ project: null }), null);
});

test('earlier history: the agent message relay-bridge opens with the marker line, shown without it', () => {
  const text = `${a.EARLIER_LINE}\n\n> hello from the desk\n\necho: hello from the desk`;
  assert.equal(a.isEarlier({ role: 'agent', text }), true);
  assert.equal(a.isEarlier({ role: 'user', text }), false, 'a user quoting it is not history');
  assert.equal(a.isEarlier({ role: 'agent', text: `Not ${a.EARLIER_LINE}` }), false);
  assert.equal(a.isEarlier({ role: 'agent' }), false);
  assert.equal(a.isEarlier(null), false);
  assert.equal(a.earlierText(text), '> hello from the desk\n\necho: hello from the desk');
  assert.equal(a.earlierText(`${a.EARLIER_LINE}\nnext`), 'next');
  assert.equal(a.earlierText('plain'), 'plain');
});

test('config signature: what the wire signs, the same from the bridge\'s side; the body decision.js posts', async () => {
  const fields = { sessionId: 'ses_1', optionId: 'mode', value: 'bypassPermissions', ts: 1764380000123, deviceId: 'dev_phone' };
  const sig = await c.configSig(PHONE_SECRET, hex(BRIDGE_PUBLIC), fields);
  const nacl = globalThis.nacl;
  const k = hkdfSync('sha256', nacl.box.before(hex(PHONE_PUBLIC), BRIDGE_SECRET), new Uint8Array(0), Buffer.from('relay/v1/config'), 32);
  const mac = (value, ts = '1764380000123') => createHmac('sha256', Buffer.from(k))
    .update(Buffer.from(`relay/v1/config\xffses_1\xffmode\xff${value}\xff${ts}\xffdev_phone`, 'latin1')).digest('base64');
  assert.equal(sig, mac('bypassPermissions'));
  assert.notEqual(sig, mac('plan'));
  assert.notEqual(sig, mac('bypassPermissions', '1764380000124'));
  // Not a decision's key: the same strings signed as a decision differ.
  assert.notEqual(await c.decisionSig(PHONE_SECRET, hex(BRIDGE_PUBLIC), { approvalId: 'ses_1', sessionId: 'mode', decision: 'bypassPermissions', scope: '1764380000123', deviceId: 'dev_phone' }), sig);

  const device = { device_id: 'dev_phone', secret_key: PHONE_SECRET };
  const bridge = { pubkey: BRIDGE_PUBLIC, confirmed_by_me: true };
  const body = await d.signedConfig('ses_1', { id: 'mode', value: 'bypassPermissions' }, device, bridge, 1764380000123.7);
  assert.deepEqual(body, { option: { id: 'mode', value: 'bypassPermissions' }, device_id: 'dev_phone', config_sig: sig, ts: 1764380000123 });
  assert.equal(await d.signedConfig('ses_1', { id: 'mode', value: 'x' }, device, { ...bridge, confirmed_by_me: false }, 1), null, 'not for a bridge never confirmed');
  assert.equal(await d.signedConfig('ses_1', { id: 'mode', value: 'x' }, null, bridge, 1), null);
});

test('a bridge\'s sealed answer opens with this device\'s secret and the bridge\'s key, and with nothing else', () => {
  const text = JSON.stringify({ projects: [{ id: 'p_1', name: 'relay', path: '/src/relay', branch: 'main', agents_used: [] }] });
  const nonce = npmNacl.randomBytes(24);
  const box = npmNacl.box(Buffer.from(text), nonce, hex(PHONE_PUBLIC), BRIDGE_SECRET);
  const b64 = Buffer.concat([Buffer.from(nonce), Buffer.from(box)]).toString('base64');
  assert.equal(c.openFromPeer(b64, PHONE_SECRET, hex(BRIDGE_PUBLIC)), text);
  // Another sender's key (a relay posing as the bridge), another recipient, a changed byte: nothing.
  const other = npmNacl.box.keyPair();
  assert.equal(c.openFromPeer(b64, PHONE_SECRET, other.publicKey), null);
  assert.equal(c.openFromPeer(b64, other.secretKey, hex(BRIDGE_PUBLIC)), null);
  const bytes = Buffer.from(b64, 'base64');
  bytes[30] ^= 1;
  assert.equal(c.openFromPeer(bytes.toString('base64'), PHONE_SECRET, hex(BRIDGE_PUBLIC)), null);
  assert.throws(() => c.openFromPeer('AAAA', PHONE_SECRET, hex(BRIDGE_PUBLIC)), c.EnvelopeError);
  assert.deepEqual(a.listEntries(JSON.parse(text), 'projects').map((p) => p.id), ['p_1']);
  assert.deepEqual(a.listEntries({ sessions: [{ agent_session_id: 's1' }, { title: 'no id' }] }, 'sessions').length, 1);
});

test('project_ct: sealed with the new session\'s key before its id is known, opened on every device holding it', async () => {
  const key = c.randomBytes(32);
  const project = { id: 'p_1', name: 'relay', path: '/src/relay', branch: 'main', worktree_branch: 'fix/x' };
  const ct = await sealed.sealProject(key, project);
  const row = await sealed.openSession([key], { id: 'ses_9', encrypted: true, title: null, project_ct: ct });
  assert.deepEqual(row.project_opened, project);
  const locked = await sealed.openSession([c.randomBytes(32)], { id: 'ses_9', encrypted: true, project_ct: ct });
  assert.equal(locked.project_opened, null);
  // The path does not name the session: the same bytes open for any id (the relay gives the id after).
  assert.deepEqual((await sealed.openSession([key], { id: 'ses_other', project_ct: ct })).project_opened, project);
  const plain = { id: 'ses_1', title: 't', encrypted: false };
  assert.equal(await sealed.openSession([], plain), plain);
  // The bridge's state of an encrypted chat seals the project it found the same way (relay-bridge, PROJECT_BLOB).
  const found = { id: 'p_1', name: 'relay', path: '/src/relay.worktrees/fix-x', branch: 'fix/x' };
  const state = { state: 'ready', project_ct: await sealed.sealProject(key, found) };
  const row2 = await sealed.openSession([key], { id: 'ses_9', encrypted: true, agent_state: state });
  assert.deepEqual(row2.agent_state.project, found);
  assert.deepEqual(a.placeOf({ ...row2, project_opened: project }), { agent: '', folder: 'relay', branch: 'fix/x', path: found.path });
  const event = await sealed.openEvent([key], 'session_state', { session_id: 'ses_9', agent_state: state });
  assert.deepEqual(event.agent_state.project, found);
  assert.equal((await sealed.openEvent([], 'session_state', { session_id: 'ses_9', agent_state: state })).agent_state.project, undefined);
});
