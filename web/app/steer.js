// A chat's agent bar (issue 36; docs/web.md "Agents, folders and modes"):
// where the chat works (agent, folder, branch), the bridge's refusal said
// plainly, and the pickers of the agent's mode, model, effort and other
// options, built from the session's agent_state. A change is posted to
// POST /v1/me/sessions/:id/config (signed in an encrypted chat, decision.js);
// what the agent took comes back for every device as the session_state event.
import { post, describe } from './api.js';
import { store, relayNow } from './state.js';
import { h, clear, toast, ask, announce } from './ui.js';
import { pickerModel, confirmation, placeOf, refusalOf } from './agents.js';
import { configBody } from './e2e.js';

// How long a change waits for the agent's new state before the picker shows the old value again.
const PENDING_MS = 20000;

export function agentBar(sessionId) {
  const place = h('p', { class: 'agent-place' });
  const refusal = h('p', { class: 'notice agent-refused', role: 'alert', hidden: true });
  const pickers = h('div', { class: 'agent-pickers' });
  const el = h('div', { class: 'agent-bar', hidden: true }, place, pickers, refusal);
  // option id -> { value, at }: a change posted, not yet in the agent's state.
  const pending = new Map();
  let timer = 0;

  const session = () => store.sessions.get(sessionId);

  async function change(picker, select) {
    const value = select.value;
    const question = confirmation(picker, value);
    if (question) {
      const ok = await ask({ ...question, danger: true });
      if (!ok) {
        select.value = picker.value;
        return;
      }
    }
    const s = session();
    pending.set(picker.id, { value, at: Date.now() });
    draw(true);
    try {
      const body = await configBody(s, { id: picker.id, value }, relayNow());
      await post(`/v1/me/sessions/${encodeURIComponent(sessionId)}/config`, body);
      announce(`${picker.label}: asked for ${(picker.values.find((v) => v.value === value) || { name: value }).name}`);
    } catch (err) {
      pending.delete(picker.id);
      toast(describe(err), 'error');
      draw(true);
    }
  }

  let signature = '';
  function draw(force = false) {
    const s = session();
    if (!s) return;
    const state = s.agent_state && typeof s.agent_state === 'object' ? s.agent_state : null;
    const model = pickerModel(state && state.options);
    // A pending change is over once the agent's state holds it, the bridge refused it, or it waited too long.
    for (const [id, p] of [...pending]) {
      const now = model.find((m) => m.id === id);
      if (!now || now.value === p.value || Date.now() - p.at > PENDING_MS || (state && state.error && state.error.code === 'config_refused')) pending.delete(id);
    }
    const where = placeOf(s);
    const refused = refusalOf(state);
    const next = JSON.stringify([where, refused, model, [...pending]]);
    if (!force && next === signature) return;
    signature = next;
    const parts = [where.agent, where.folder].filter(Boolean);
    clear(place);
    if (parts.length || where.branch) {
      place.append(h('span', { class: 'agent-place-text', text: parts.join(' · ') }));
      if (where.branch) place.append(h('span', { class: 'agent-branch', title: 'Git branch', 'aria-label': `branch ${where.branch}`, text: where.branch }));
      if (where.path) place.title = where.path;
    }
    place.hidden = !parts.length && !where.branch;
    refusal.hidden = !refused;
    refusal.textContent = refused ? refused.text : '';
    refusal.dataset.code = refused ? refused.code : '';
    // A focused picker is not rebuilt under the finger: the next state redraws it.
    if (pickers.contains(document.activeElement) && !force) {
      signature = '';
      return;
    }
    clear(pickers);
    for (const picker of refused && refused.refused ? [] : model) {
      const wait = pending.get(picker.id);
      const id = `agent-option-${sessionId}-${picker.id}`.replace(/[^A-Za-z0-9_-]/g, '_');
      const select = h('select', { id, class: 'agent-option', dataset: { option: picker.id, kind: picker.kind }, disabled: !!wait,
        'aria-label': picker.label },
      picker.values.map((v) => h('option', { value: v.value, selected: v.value === (wait ? wait.value : picker.value),
        text: v.risk === 'high' ? `${v.name} (asks nothing)` : v.name, title: v.description || null })));
      select.addEventListener('change', () => change(picker, select));
      pickers.append(h('label', { class: `agent-picker${wait ? ' agent-picker-pending' : ''}`, for: id },
        h('span', { class: 'agent-picker-label', text: wait ? `${picker.label} (changing…)` : picker.label }), select));
    }
    pickers.hidden = pickers.children.length === 0;
    el.hidden = place.hidden && refusal.hidden && pickers.hidden;
    if (pending.size && !timer) timer = setTimeout(() => { timer = 0; draw(true); }, PENDING_MS + 100);
  }

  return {
    el,
    draw,
    // Whether the session has an agent state at all (a bridge of issue 36): the old static mode label goes then.
    steered: () => {
      const s = session();
      return !!(s && s.agent_state && typeof s.agent_state === 'object');
    },
    dispose: () => clearTimeout(timer),
  };
}
