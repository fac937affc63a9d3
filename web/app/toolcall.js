// The cards of an agent's tasks in a chat: a tool call (its kind, title, one
// status, what it carries, its arguments and result behind disclosures), a
// plan (a checklist that changes in place) and thinking (collapsed). Each card
// is keyed by task id and redrawn in place when its task changes (chat.js).
import { h, clear, icon } from './ui.js';
import { renderBlocks } from './blocks.js';
import { terminalOf, shellView, followShell } from './shell.js';
import {
  taskKind, taskState, planEntries, thinkingText, contentBlocks, resultDetail, errorText, argsDetail,
} from './transcript.js';

// Kinds whose text output is worth a glance only on demand (a file read, a search's hits, a page fetched).
const QUIET_OUTPUT = new Set(['read', 'search', 'fetch']);

function json(value) {
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

function disclosure(part, label, ...children) {
  return h('details', { class: 'task-detail', dataset: { part } }, h('summary', { text: label }), children);
}

function toolCall(el, t) {
  const kind = taskKind(t.kind);
  const { state, label } = taskState(t);
  const title = t.name || t.status_label || kind.label;
  el.className = `task task-${state} task-kind-${t.kind || 'other'}`;
  el.setAttribute('aria-label', `${kind.label}: ${title}, ${label.toLowerCase()}`);
  el.append(h('div', { class: 'task-head' },
    h('span', { class: 'task-icon' }, icon(kind.icon)),
    h('span', { class: 'task-kind', text: kind.label }),
    h('strong', { class: 'task-name', text: title }),
    h('span', { class: `pill pill-task-${state}`, text: label })));
  if (t.status_label && t.status_label !== title && state === 'running') el.append(h('div', { class: 'task-label', text: t.status_label }));
  if (typeof t.progress_percent === 'number' && state === 'running')
    el.append(h('progress', { max: '100', value: String(t.progress_percent), 'aria-label': `${Math.round(t.progress_percent)} percent` }));

  const blocks = contentBlocks(t);
  const sourceOf = t.result && Array.isArray(t.result.content) ? t.result : t.partial_result;
  const locations = sourceOf && Array.isArray(sourceOf.locations) ? sourceOf.locations.filter((l) => l && typeof l.path === 'string') : [];
  if (locations.length && !blocks.some((b) => b.type === 'diff'))
    el.append(h('ul', { class: 'task-locations', 'aria-label': 'Files' },
      locations.map((l) => h('li', { text: typeof l.line === 'number' ? `${l.path}:${l.line}` : l.path }))));
  const error = state === 'failed' ? errorText(t.error) : '';
  if (error) el.append(h('p', { class: 'task-error', role: 'note', text: error }));
  const terminal = terminalOf(t);
  if (terminal) el.append(shellView(terminal, state === 'running'));
  if (blocks.length) {
    const shown = renderBlocks(blocks, { kind: t.kind });
    const quiet = QUIET_OUTPUT.has(t.kind) && !blocks.some((b) => b.type === 'diff');
    el.append(quiet ? disclosure('output', 'Output', shown) : h('div', { class: 'task-content' }, shown));
  }
  const args = argsDetail(t.args);
  if (args !== null) el.append(disclosure('args', 'Arguments', h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: json(args) }))));
  const result = resultDetail(t);
  if (result !== null) el.append(disclosure('result', 'Result', h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: json(result) }))));
  if (state === 'failed' && !error && t.error !== undefined && t.error !== null)
    el.append(disclosure('error', 'Error', h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: json(t.error) }))));
}

const PLAN_MARK = { completed: 'Done', in_progress: 'In progress', pending: 'To do' };

function plan(el, t) {
  const entries = planEntries(t);
  const { state } = taskState(t);
  const done = entries.filter((e) => e.status === 'completed').length;
  el.className = `task task-plan task-${state}`;
  el.setAttribute('aria-label', `Plan: ${done} of ${entries.length} done`);
  el.append(h('div', { class: 'task-head' },
    h('span', { class: 'task-icon' }, icon('plan')),
    h('strong', { class: 'task-name', text: 'Plan' }),
    h('span', { class: `pill pill-task-${done === entries.length && entries.length ? 'completed' : 'running'}`, text: `${done} of ${entries.length} done` })));
  if (!entries.length) {
    el.append(h('p', { class: 'block-note', text: 'No steps yet.' }));
    return;
  }
  el.append(h('ol', { class: 'plan-list' }, entries.map((e) =>
    h('li', { class: `plan-entry plan-${e.status}` },
      h('span', { class: 'plan-mark', 'aria-hidden': 'true' }),
      h('span', { class: 'sr-only', text: `${PLAN_MARK[e.status]}: ` }),
      h('span', { class: 'plan-text', text: e.content }),
      e.priority === 'high' ? h('span', { class: 'pill plan-priority', text: 'high priority' }) : null))));
}

function thinking(el, t) {
  const { state } = taskState(t);
  const text = thinkingText(t);
  el.className = `task task-think task-${state}`;
  el.setAttribute('aria-label', state === 'running' ? 'The agent is thinking' : 'The agent’s thinking');
  el.append(h('details', { class: 'thinking', dataset: { part: 'thinking' } },
    h('summary', {}, icon('think'), h('span', { text: state === 'running' ? 'Thinking…' : 'Thinking' })),
    text ? h('div', { class: 'thinking-text', text }) : h('p', { class: 'block-note', text: 'Nothing to show.' })));
}

// The task each card last showed: a merge makes a new object (transcript.js), so an unchanged task is the same
// one, and a chat redrawn for every streamed delta does not re-serialise a 256 KiB diff each time.
const shown = new WeakMap();

export const taskCard = {
  create() {
    return h('section', { class: 'task' });
  },

  update(el, t) {
    if (shown.get(el) === t) return;
    shown.set(el, t);
    const signature = JSON.stringify([t.status, t.kind, t.name, t.progress_percent, t.status_label, t.args, t.partial_result, t.result, t.error]);
    if (el.dataset.signature === signature) return;
    el.dataset.signature = signature;
    if (t.task_id) el.dataset.taskId = t.task_id;
    // What the reader opened stays open across a redraw.
    const open = new Set([...el.querySelectorAll('details[open][data-part]')].map((d) => d.dataset.part));
    clear(el);
    if (t.kind === 'plan') plan(el, t);
    else if (t.kind === 'think') thinking(el, t);
    else toolCall(el, t);
    for (const d of el.querySelectorAll('details[data-part]')) if (open.has(d.dataset.part)) d.open = true;
    followShell(el);
  },
};
