// What an agent's tool call carries, shown: content blocks (docs/api.md "Content blocks":
// text, diff, terminal) for tool-call cards (toolcall.js) and approval cards
// (approvals.js) alike, so that the user approves the same diff they later
// see applied. The diff itself is computed by diff.js; this module only
// builds DOM, with h() and textContent like the rest of the app.
import { h } from './ui.js';
import { diffLines, hunks, stats } from './diff.js';
import { unfence } from './transcript.js';

// Lines shown at once in one diff; the rest waits behind a button (a new 5 000-line file must not stall a phone).
const EAGER_LINES = 400;

const SIGN = { add: '+', del: '−', same: ' ' };
const SPOKEN = { add: 'Added', del: 'Removed', same: '' };

function lineEl(op) {
  return h('div', { class: `diff-line diff-${op.type}` },
    h('span', { class: 'diff-ln', 'aria-hidden': 'true', text: op.old === null ? '' : String(op.old) }),
    h('span', { class: 'diff-ln', 'aria-hidden': 'true', text: op.new === null ? '' : String(op.new) }),
    h('span', { class: 'diff-sign', 'aria-hidden': 'true', text: SIGN[op.type] }),
    h('span', { class: 'diff-code' }, SPOKEN[op.type] ? h('span', { class: 'sr-only', text: `${SPOKEN[op.type]}: ` }) : null,
      op.text === '' ? '\u200b' : op.text));
}

// A button standing for lines not shown yet; pressed, it puts them in its place.
function moreEl(lines, label) {
  const button = h('button', { type: 'button', class: 'diff-fold', text: label,
    onclick: () => {
      const shown = lines.map(lineEl);
      button.replaceWith(...shown);
      if (shown[0]) shown[0].setAttribute('tabindex', '-1');
      if (shown[0]) shown[0].focus({ preventScroll: true });
    } });
  return button;
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

function pathEl(path) {
  const text = typeof path === 'string' && path ? path : 'file';
  const cut = text.lastIndexOf('/') + 1;
  // A long path breaks after a slash, not in the middle of a name.
  const dirs = text.slice(0, cut - 1).split('/').map((d) => `${d}/`);
  return h('span', { class: 'diff-path' },
    cut > 0 ? h('span', { class: 'diff-dir' }, dirs.map((d) => [d, h('wbr')])) : null,
    h('strong', { text: text.slice(cut) }));
}

// One file's change, unified, with line numbers; unchanged runs folded.
export function diffView(block) {
  const created = block.old_text === null || block.old_text === undefined;
  const oldText = created ? '' : String(block.old_text);
  const newText = typeof block.new_text === 'string' ? block.new_text : '';
  const { ops, exact } = diffLines(oldText, newText);
  const { added, removed } = stats(ops);
  const path = typeof block.path === 'string' && block.path ? block.path : 'file';
  const head = h('div', { class: 'diff-head' },
    pathEl(path),
    created ? h('span', { class: 'pill diff-badge diff-badge-new', text: 'New file' }) : null,
    h('span', { class: 'diff-stat' },
      h('span', { class: 'diff-stat-add', text: `+${added}` }), ' ',
      h('span', { class: 'diff-stat-del', text: `−${removed}` }),
      h('span', { class: 'sr-only', text: ` (${plural(added, 'line', 'lines')} added, ${plural(removed, 'line', 'lines')} removed)` })));
  const notes = [];
  if (block.truncated) notes.push('Cut short: the agent sent only the start of this file.');
  if (!exact) notes.push('Too large to compare line by line: shown as the old text removed and the new one added.');
  if (ops.length && !added && !removed) notes.push('No change to the text.');
  if (!ops.length) notes.push(created ? 'An empty new file.' : 'Both versions are empty.');

  const lines = h('div', { class: 'diff-lines' });
  let top = 0;
  for (const op of ops) top = Math.max(top, op.old || 0, op.new || 0);
  lines.style.setProperty('--diff-ln', `${Math.max(2, String(top).length)}ch`);
  let shown = 0;
  const parts = hunks(ops);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (part.type === 'fold') {
      lines.append(moreEl(part.lines, `${plural(part.lines.length, 'unchanged line', 'unchanged lines')}`));
      continue;
    }
    const room = Math.max(0, EAGER_LINES - shown);
    lines.append(...part.lines.slice(0, room).map(lineEl));
    shown += Math.min(room, part.lines.length);
    if (part.lines.length > room) {
      const rest = part.lines.slice(room);
      for (const later of parts.slice(i + 1)) rest.push(...later.lines);
      lines.append(moreEl(rest, `Show ${plural(rest.length, 'more line', 'more lines')}`));
      break;
    }
  }
  return h('div', { class: 'diff', role: 'group', 'aria-label': `${created ? 'New file' : 'Changes to'} ${path}` },
    head,
    notes.map((text) => h('p', { class: 'block-note', text })),
    ops.length ? h('div', { class: 'diff-body', tabindex: '0', role: 'region', 'aria-label': `Diff of ${path}` }, lines) : null);
}

function textView(block, monospace) {
  const text = typeof block.text === 'string' ? unfence(block.text) : '';
  return h('div', { class: 'block' },
    h('pre', { class: `code-block block-output${monospace ? '' : ' block-wrap'}`, tabindex: '0' }, h('code', { text })),
    block.truncated ? h('p', { class: 'block-note', text: 'Cut short: the agent sent only the start.' }) : null);
}

function terminalView(block) {
  const output = typeof block.output === 'string' ? unfence(block.output) : '';
  const exit = typeof block.exit_code === 'number' ? block.exit_code : null;
  return h('div', { class: 'block block-terminal' },
    output ? h('pre', { class: 'code-block block-output', tabindex: '0', 'aria-label': 'Terminal output' }, h('code', { text: output })) : null,
    exit === null ? null : h('p', { class: `block-exit${exit ? ' block-exit-failed' : ''}`, text: `Exit code ${exit}` }),
    block.truncated ? h('p', { class: 'block-note', text: 'Cut short: the agent sent only the start.' }) : null);
}

// Kinds whose text output reads as a terminal's (kept as it is, scrolled sideways).
const MONOSPACE = new Set(['execute', 'exec']);

// The blocks of a tool call or an approval, in order. `kind` is the tool's (execute text stays monospace, unwrapped).
export function renderBlocks(blocks, { kind } = {}) {
  const out = [];
  for (const block of Array.isArray(blocks) ? blocks : []) {
    if (!block || typeof block !== 'object') continue;
    if (block.type === 'diff') out.push(diffView(block));
    else if (block.type === 'text') out.push(textView(block, MONOSPACE.has(kind)));
    else if (block.type === 'terminal') out.push(terminalView(block));
    else if (typeof block.type === 'string') out.push(h('p', { class: 'block-note', text: `Content of type “${block.type}” is not shown here.` }));
  }
  return out;
}
