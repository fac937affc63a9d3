// A machine's agents and projects, and a session's agent state, as the
// screens show them (issue 36; docs/web.md "Agents, folders and modes"):
// which agent a new chat preselects, the pickers built from the options the
// agent offers, which changes ask for confirmation first, where a chat works
// (agent, folder, branch), a refusal in words. Pure: no DOM, no network, no
// storage (tests/browser/unit/agents.test.js).
import { agentLabel } from './transcript.js';

const NAME = /^[a-z0-9_-]{1,32}$/;

// The agents of an installation's manifest, default first: { agents: [{name, label, kind, default,
// supports}], chosen (the default's name, or the first's), show (a picker only when there is a choice) }.
// An installation of an older bridge has no `agents`: no picker, and the session names none.
export function agentChoices(inst) {
  const listed = inst && Array.isArray(inst.agents) ? inst.agents.filter((a) => a && typeof a.name === 'string' && NAME.test(a.name)) : [];
  const agents = listed.map((a) => ({
    name: a.name,
    label: agentLabel(a.name),
    kind: typeof a.kind === 'string' ? a.kind : '',
    default: a.default === true,
    supports: a.supports && typeof a.supports === 'object' ? a.supports : {},
  }));
  agents.sort((a, b) => Number(b.default) - Number(a.default));
  return { agents, chosen: agents.length ? agents[0].name : null, show: agents.length > 1 };
}

// Whether a manifest agent lists its own sessions (the "Continue a session" list).
export function listsSessions(agent) {
  return !!(agent && agent.supports && agent.supports.session_list === true);
}

const KIND_ORDER = ['mode', 'model', 'effort', 'select', 'toggle'];
const KIND_LABEL = { mode: 'Mode', model: 'Model', effort: 'Effort' };
const str = (v, max) => typeof v === 'string' && v.length > 0 && v.length <= max;

// agent_state.options -> what the chat's pickers show: [{id, label, kind, value, current (the current
// value's name), values: [{value, name, description, risk}]}], mode first, then model, effort and the
// rest in the agent's order. An option without a usable id or with fewer than two values offers no
// choice and is left out; a current value the list does not hold is kept as it is, named by itself.
export function pickerModel(options) {
  if (!Array.isArray(options)) return [];
  const out = [];
  const seen = new Set();
  for (const o of options) {
    if (!o || !str(o.id, 128) || seen.has(o.id) || !Array.isArray(o.values)) continue;
    const values = [];
    for (const v of o.values) {
      if (!v || !str(v.value, 128) || values.some((x) => x.value === v.value)) continue;
      values.push({ value: v.value, name: str(v.name, 128) ? v.name : v.value, description: str(v.description, 1024) ? v.description : '',
        risk: v.risk === 'high' ? 'high' : null });
    }
    const value = typeof o.value === 'string' ? o.value : '';
    if (value && !values.some((v) => v.value === value)) values.unshift({ value, name: value, description: '', risk: null });
    if (values.length < 2) continue;
    seen.add(o.id);
    const kind = KIND_ORDER.includes(o.kind) ? o.kind : 'select';
    const label = str(o.name, 128) ? o.name : KIND_LABEL[kind] || o.id;
    const current = values.find((v) => v.value === value);
    out.push({ id: o.id, label, kind, value, current: current ? current.name : '', values });
  }
  return out.map((p, i) => ({ p, i }))
    .sort((a, b) => KIND_ORDER.indexOf(a.p.kind) - KIND_ORDER.indexOf(b.p.kind) || a.i - b.i)
    .map(({ p }) => p);
}

export const RISK_TEXT = 'The agent will act without asking you';

// Whether choosing `value` for a picker asks first: a value marked risk "high" (an agent's mode that turns
// its approvals off), when it is not already the current one. Returns null, or what the question says.
export function confirmation(picker, value) {
  if (!picker || value === picker.value) return null;
  const chosen = picker.values.find((v) => v.value === value);
  if (!chosen || chosen.risk !== 'high') return null;
  return { title: `${picker.label}: ${chosen.name}?`, text: `${RISK_TEXT}: it will edit files and run commands on the machine without asking you here first.`, confirm: `Switch to ${chosen.name}` };
}

// Where a chat works: { agent (its label, or ''), folder (the project's name), branch, path }. Plain chats
// read the bridge's agent_state.project; encrypted ones the opened project_ct (sealed.js: `project_opened`)
// and, for the folder's name, what the person picked. Empty strings where nothing is known.
export function placeOf(session) {
  const place = { agent: '', folder: '', branch: '', path: '' };
  if (!session) return place;
  if (typeof session.agent === 'string' && session.agent) place.agent = agentLabel(session.agent);
  const state = session.agent_state && typeof session.agent_state === 'object' ? session.agent_state : null;
  const live = state && state.project && typeof state.project === 'object' ? state.project : null;
  const opened = session.project_opened && typeof session.project_opened === 'object' ? session.project_opened : null;
  for (const from of [opened, live]) {
    if (!from) continue;
    if (str(from.name, 256)) place.folder = from.name;
    if (str(from.path, 1024)) place.path = from.path;
    if (str(from.branch, 256)) place.branch = from.branch;
    if (str(from.worktree_branch, 256)) place.branch = from.worktree_branch;
  }
  if (!place.folder && place.path) place.folder = place.path.replace(/\/+$/, '').split('/').pop();
  return place;
}

// The bridge's refusal codes (docs/api.md "Starting a session") in words; the bridge's own message follows.
const REFUSALS = {
  folder_outside_roots: 'This folder is outside the folders the machine allows',
  not_a_folder: 'This is not a folder on the machine',
  unknown_project: 'The machine does not know this project',
  worktree_name_invalid: 'This branch name cannot be used for a worktree',
  worktree_failed: 'The machine could not make the worktree',
  agent_not_configured: 'This agent is not configured on the machine',
  resume_failed: 'The agent could not continue that session',
  config_refused: 'The machine refused the change',
};

// What a chat says of its agent_state's error: null when there is none. { refused (the session will not
// run), code, text }.
export function refusalOf(state) {
  if (!state || typeof state !== 'object' || !state.error || typeof state.error !== 'object') return null;
  const code = typeof state.error.code === 'string' ? state.error.code : '';
  const message = typeof state.error.message === 'string' ? state.error.message.trim() : '';
  const known = REFUSALS[code];
  const text = known ? (message && message !== known ? `${known}: ${message}` : `${known}.`) : message || `The machine refused (${code || 'no reason given'}).`;
  return { refused: state.state === 'refused', code, text };
}

// A new worktree's branch as git takes it (git check-ref-format --branch, and the bridge's own rules:
// no leading "-", no "/.." and no control bytes). Returns null when it is fine, else the reason.
export function worktreeBranchProblem(name) {
  if (typeof name !== 'string' || name.length === 0) return 'Give the new branch a name.';
  if (name.length > 100) return 'At most 100 characters.';
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name)) return 'No spaces, and none of ~ ^ : ? * [ \\.';
  if (name.startsWith('-')) return 'It cannot start with "-".';
  if (name.startsWith('/') || name.endsWith('/') || name.includes('//')) return 'No "/" at either end, and no "//".';
  if (name.includes('..') || name.includes('@{') || name === '@') return 'No "..", no "@{", and not "@" alone.';
  if (name.endsWith('.') || name.endsWith('.lock') || name.split('/').some((part) => part.startsWith('.') || part.endsWith('.lock'))) {
    return 'No part may start with "." or end with ".lock", and no "." at the end.';
  }
  return null;
}

// POST /v1/me/sessions's new fields for a plain chat (an encrypted one seals `project` as project_ct).
// choice: { agent, project: {id, name, path, branch} | null, worktree: branch or '', resume: id or '' }.
export function startFields(choice) {
  const body = {};
  if (choice.agent) body.agent = choice.agent;
  if (choice.project && choice.project.id) {
    body.project = { id: choice.project.id };
    if (choice.worktree) body.project.worktree_branch = choice.worktree;
  }
  if (choice.resume) body.resume = { agent_session_id: choice.resume };
  return body;
}

// What an encrypted chat seals as project_ct: the id and branch the bridge acts on, and the name, path and
// branch this device showed (display only, for the chat's header on every device holding the key).
export function sealedProject(choice) {
  if (!choice.project || !choice.project.id) return null;
  const p = { id: choice.project.id };
  if (choice.worktree) p.worktree_branch = choice.worktree;
  if (str(choice.project.name, 256)) p.name = choice.project.name;
  if (str(choice.project.path, 1024)) p.path = choice.project.path;
  if (str(choice.project.branch, 256)) p.branch = choice.project.branch;
  return p;
}

// A bridge's list answer as opened: { projects: [...] } or { sessions: [...] }, entries kept only when they
// have an id. `kind`: 'projects' or 'sessions'.
export function listEntries(answer, kind) {
  const list = answer && Array.isArray(answer[kind]) ? answer[kind] : [];
  const idKey = kind === 'projects' ? 'id' : 'agent_session_id';
  return list.filter((e) => e && str(e[idKey], 256));
}

// The agent's earlier history (a chat continuing one of the agent's sessions by session/load): relay-bridge
// posts what the agent replayed as one agent message whose first line is this one (docs/api.md "A
// continued session's history"), the user's turns quoted with "> ".
export const EARLIER_LINE = '[Earlier in this session, before it was continued here]';

export function isEarlier(m) {
  return !!m && m.role === 'agent' && typeof m.text === 'string' && m.text.startsWith(EARLIER_LINE);
}

// Its text as shown: the marker line (and the blank line after it) left out, the chat says it in words.
export function earlierText(text) {
  return text.startsWith(EARLIER_LINE) ? text.slice(EARLIER_LINE.length).replace(/^[ \t]*\r?\n(?:[ \t]*\r?\n)?/, '') : text;
}
