// The New chat form's choices of issue 36 (docs/web.md "Agents, folders and
// modes"): the agent (from the machine's manifest, its default preselected,
// no picker when there is one), the folder (the machine's projects, read live
// from its bridge and sealed to this device), an optional new worktree on a
// new branch, and "Continue a session": the agent's own sessions of that
// folder, one of which the new chat continues.
import { get, describe } from './api.js';
import { store } from './state.js';
import { h, clear, formatTime } from './ui.js';
import { agentChoices, listsSessions, worktreeBranchProblem, listEntries } from './agents.js';
import { openBridgeAnswer, listDevice, onKeys } from './e2e.js';

// The bridge's own error code behind a relay's 502 (docs/api.md "Projects": details.bridge_error).
const bridgeCode = (err) => (err && err.details && err.details.bridge_error && err.details.bridge_error.code) || '';

// A list from the machine's bridge (path with its query, without device_id), opened. Asked for sealed to
// this device; a bridge that has not accepted this device (not verified yet) is asked again without it,
// which a bridge whose owner allows plain lists (--plain-projects, --no-e2e) answers.
async function askBridge(installationId, path, params) {
  const device = listDevice();
  const url = (withDevice) => {
    const q = new URLSearchParams(params);
    if (withDevice && device) q.set('device_id', device);
    const text = q.toString();
    return `/v1/me/installations/${encodeURIComponent(installationId)}/${path}${text ? `?${text}` : ''}`;
  };
  try {
    return await openBridgeAnswer(installationId, await get(url(true)));
  } catch (err) {
    if (!device || bridgeCode(err) !== 'device_not_accepted') throw err;
    return openBridgeAnswer(installationId, await get(url(false)));
  }
}

// Why a list cannot be shown, in words.
function listProblem(err) {
  const code = bridgeCode(err);
  if (code === 'device_required' || code === 'device_not_accepted') {
    return 'the machine sends them only to a device it accepted: verify the machine on this device first';
  }
  if (code === 'unsupported') return 'this agent does not list its sessions';
  return describe(err).replace(/\.$/, '');
}

// draft: what the form held before ({agent, project_id, worktree, branch}); onChange(): the form changed.
export function startPickers(machine, draft, onChange) {
  const agentSelect = h('select', { id: 'new-agent' });
  const agentField = h('div', { class: 'new-field', hidden: true },
    h('label', { for: 'new-agent', class: 'field-label', text: 'Agent' }), agentSelect);
  const projectSelect = h('select', { id: 'new-project', 'aria-describedby': 'new-project-hint' });
  const projectHint = h('p', { id: 'new-project-hint', class: 'field-hint', role: 'status' });
  const worktreeBox = h('input', { id: 'new-worktree', type: 'checkbox', class: 'checkbox' });
  const branchInput = h('input', { id: 'new-branch', type: 'text', maxlength: '100', autocomplete: 'off', spellcheck: 'false',
    autocapitalize: 'off', placeholder: 'feature/my-change', 'aria-describedby': 'new-branch-hint' });
  const branchHint = h('p', { id: 'new-branch-hint', class: 'field-hint' });
  const branchField = h('div', { class: 'new-branch', hidden: true },
    h('label', { for: 'new-branch', class: 'field-label', text: 'New branch' }), branchInput, branchHint);
  const worktreeField = h('div', { class: 'new-worktree', hidden: true },
    h('label', { class: 'check-label', for: 'new-worktree' }, worktreeBox, h('span', { text: 'New worktree on a new branch' })), branchField);
  const projectField = h('div', { class: 'new-field', hidden: true },
    h('label', { for: 'new-project', class: 'field-label', text: 'Folder' }), projectSelect, projectHint, worktreeField);
  const resumeButton = h('button', { type: 'button', class: 'btn btn-small', text: 'Continue a session' });
  const resumeList = h('div', { class: 'resume-list', role: 'radiogroup', 'aria-labelledby': 'new-resume-title', hidden: true });
  const resumeHint = h('p', { class: 'field-hint', role: 'status' });
  const resumeField = h('div', { class: 'new-field new-resume', hidden: true },
    h('p', { id: 'new-resume-title', class: 'field-label', text: "The agent's sessions" }),
    h('p', { class: 'field-hint', text: 'Continue one begun on the machine, or start a new one.' }),
    resumeButton, resumeHint, resumeList);
  const el = h('div', { class: 'new-pickers' }, agentField, projectField, resumeField);

  let choices = { agents: [], chosen: null, show: false };
  let projects = [];
  let projectsFor = null; // the machine and device the list was read for
  let resume = '';
  let resumeTitle = '';
  let serial = 0;

  const agentOf = (name) => choices.agents.find((a) => a.name === name) || null;
  const projectOf = (id) => projects.find((p) => p.id === id) || null;

  function drawAgents() {
    const inst = store.installations.get(machine.value);
    choices = agentChoices(inst);
    clear(agentSelect);
    const wanted = draft && draft.agent && agentOf(draft.agent) ? draft.agent : choices.chosen;
    for (const a of choices.agents) {
      agentSelect.append(h('option', { value: a.name, selected: a.name === wanted, text: a.default ? `${a.label} (default)` : a.label }));
    }
    agentField.hidden = !choices.show;
  }

  function drawProjects(message = '') {
    const wanted = projectSelect.value || (draft && draft.project_id) || '';
    clear(projectSelect);
    projectSelect.append(h('option', { value: '', text: "The agent's usual folder" }));
    const agent = agentSelect.value;
    // The folders this agent worked in first, then the others, each in the bridge's order.
    const ordered = [...projects].sort((a, b) => Number(used(b, agent)) - Number(used(a, agent)));
    for (const p of ordered) {
      const name = p.name || p.path || p.id;
      projectSelect.append(h('option', { value: p.id, selected: p.id === wanted, text: p.branch ? `${name} (${p.branch})` : name }));
    }
    const picked = projectOf(projectSelect.value);
    projectHint.textContent = message || (picked && picked.path ? picked.path : '');
    projectField.hidden = !projects.length && !message;
    worktreeField.hidden = !picked;
    if (!picked) worktreeBox.checked = false;
    branchField.hidden = !worktreeBox.checked;
    drawResume();
  }

  const used = (p, agent) => Array.isArray(p.agents_used) && p.agents_used.includes(agent);

  async function loadProjects() {
    const id = machine.value;
    const device = listDevice();
    const key = `${id}/${device}`;
    if (projectsFor === key) return;
    projectsFor = key;
    projects = [];
    const mine = ++serial;
    drawProjects('Reading the machine\'s folders…');
    try {
      const answer = await askBridge(id, 'projects', {});
      if (mine !== serial) return;
      projects = listEntries(answer, 'projects');
      drawProjects(projects.length ? '' : 'The machine lists no folders: the agent works in its usual one.');
    } catch (err) {
      if (mine !== serial) return;
      projectsFor = null; // tried again when the machine or this device changes
      if (err.status === 429) {
        // Too many requests of this user (api.js has waited and retried three times): read again when the relay says,
        // while this form is on screen, rather than leave "Too many requests" there for good.
        drawProjects('Reading the machine\'s folders…');
        setTimeout(() => { if (mine === serial && projectSelect.isConnected) loadProjects(); }, Math.max(err.retryAfterMs || 0, 1000));
        return;
      }
      drawProjects(err.status === 404 && err.code === 'not_found' ? '' : `The machine's folders cannot be listed: ${listProblem(err)}.`);
      projectField.hidden = err.status === 404 && err.code === 'not_found';
    }
    onChange();
  }

  function drawResume() {
    const agent = agentOf(agentSelect.value);
    const project = projectOf(projectSelect.value);
    const shown = !!(agent && project && listsSessions(agent));
    resumeField.hidden = !shown;
    if (!shown) {
      resume = '';
      resumeTitle = '';
      resumeList.hidden = true;
      clear(resumeList);
      resumeHint.textContent = '';
      resumeButton.hidden = false;
    }
  }

  async function loadSessions() {
    const agent = agentSelect.value;
    const project = projectSelect.value;
    const id = machine.value;
    resumeButton.disabled = true;
    resumeHint.textContent = 'Reading the agent\'s sessions…';
    try {
      const answer = await askBridge(id, 'agent-sessions', { agent, project_id: project });
      if (agent !== agentSelect.value || project !== projectSelect.value || id !== machine.value) return;
      const sessions = listEntries(answer, 'sessions').sort((a, b) => (b.updated_at || 0) - (a.updated_at || 0));
      drawSessionList(sessions);
      resumeHint.textContent = sessions.length ? '' : 'The agent has no session in this folder yet.';
      resumeButton.hidden = sessions.length > 0;
    } catch (err) {
      resumeHint.textContent = `The agent's sessions cannot be listed: ${listProblem(err)}.`;
    } finally {
      resumeButton.disabled = false;
    }
  }

  function drawSessionList(sessions) {
    clear(resumeList);
    resume = '';
    resumeTitle = '';
    const radio = (value, title, sub, bound) => {
      const input = h('input', { type: 'radio', name: 'new-resume', value, checked: value === '', class: 'radio' });
      input.addEventListener('change', () => {
        resume = input.value;
        resumeTitle = input.checked && value ? title : '';
        // A continued session goes on in the folder it began in: no new worktree for it.
        worktreeField.hidden = !!resume;
        onChange();
      });
      return h('label', { class: `resume-item${bound ? ' resume-bound' : ''}` }, input,
        h('span', { class: 'resume-text' }, h('span', { class: 'resume-title', text: title }), sub ? h('span', { class: 'resume-sub', text: sub }) : null));
    };
    resumeList.append(radio('', 'Start a new session', '', false));
    for (const s of sessions) {
      const when = s.updated_at ? formatTime(typeof s.updated_at === 'number' ? s.updated_at : Date.parse(s.updated_at)) : '';
      const bound = typeof s.bound_session_id === 'string' && s.bound_session_id;
      const sub = [when, bound ? 'already continued in a chat here' : ''].filter(Boolean).join(' · ');
      resumeList.append(radio(s.agent_session_id, typeof s.title === 'string' && s.title.trim() ? s.title.trim() : 'Untitled session', sub, bound));
    }
    resumeList.hidden = false;
  }

  function branchProblem() {
    if (worktreeField.hidden || !worktreeBox.checked || resume) return null;
    return worktreeBranchProblem(branchInput.value.trim());
  }

  function drawBranch() {
    const problem = branchInput.value ? branchProblem() : null;
    branchHint.textContent = problem || 'The machine makes a new git worktree beside the folder, on this new branch.';
    branchInput.setAttribute('aria-invalid', problem ? 'true' : 'false');
  }

  agentSelect.addEventListener('change', () => {
    drawProjects();
    onChange();
  });
  projectSelect.addEventListener('change', () => {
    drawProjects();
    onChange();
  });
  worktreeBox.addEventListener('change', () => {
    branchField.hidden = !worktreeBox.checked;
    drawBranch();
    if (worktreeBox.checked) branchInput.focus();
    onChange();
  });
  branchInput.addEventListener('input', () => {
    drawBranch();
    onChange();
  });
  resumeButton.addEventListener('click', loadSessions);

  function machineChanged() {
    drawAgents();
    projects = [];
    drawProjects();
    loadProjects();
  }

  if (draft && draft.worktree) {
    worktreeBox.checked = true;
    branchInput.value = draft.branch || '';
  }
  drawAgents();
  drawProjects();
  drawBranch();
  loadProjects();
  // This device's key may arrive after the form opened: the folders are sealed to it.
  const offKeys = onKeys((id) => {
    if (id === null) loadProjects();
  });

  return {
    el,
    machineChanged,
    // What the form chose: { agent, project: {id, name, path, branch} | null, worktree, resume, resumeTitle }.
    choice() {
      const project = projectOf(projectSelect.value);
      return {
        agent: choices.agents.length ? agentSelect.value : null,
        project,
        worktree: project && worktreeBox.checked && !resume ? branchInput.value.trim() : '',
        resume: project ? resume : '',
        resumeTitle: project ? resumeTitle : '',
      };
    },
    // The form's draft fields (kept while the person verifies the machine).
    draft() {
      return { agent: agentSelect.value || null, project_id: projectSelect.value || null, worktree: worktreeBox.checked, branch: branchInput.value };
    },
    // Why the form cannot be sent yet, or null.
    problem: branchProblem,
    focusProblem: () => branchInput.focus(),
    dispose: offKeys,
  };
}
