// A command's output in its task card (docs/web.md "Shell output"): the task's `terminal`
// ({output, exit_status?, truncated?}, docs/api.md "Shell output"), shown live while it runs,
// monospace, capped in height and kept scrolled to its end, with the exit status once it ended.
import { h } from './ui.js';

// The task's terminal: the result's once it ended, else the latest partial result's; null when none.
export function terminalOf(task) {
  for (const r of [task.result, task.partial_result]) {
    const t = r && typeof r === 'object' ? r.terminal : null;
    if (t && typeof t === 'object' && typeof t.output === 'string') return t;
  }
  return null;
}

export function shellView(terminal, running) {
  const exit = Number.isInteger(terminal.exit_status) ? terminal.exit_status : null;
  const status = exit !== null ? `Exit status ${exit}` : running ? 'Running…' : '';
  return h('div', { class: 'shell' },
    terminal.truncated ? h('p', { class: 'block-note', text: 'Earlier output not shown: the last 16 KiB.' }) : null,
    h('pre', { class: 'code-block shell-output', tabindex: '0', 'aria-label': 'Command output', 'aria-live': running ? 'polite' : 'off' },
      h('code', { text: terminal.output || (running ? '' : '(no output)') })),
    status ? h('p', { class: `shell-status${exit ? ' shell-status-failed' : ''}`, text: status }) : null);
}

// Keeps the output scrolled to its end, as a terminal does (after the card is in the page).
export function followShell(el) {
  const pre = el.querySelector('.shell-output');
  if (pre) requestAnimationFrame(() => { pre.scrollTop = pre.scrollHeight; });
}
