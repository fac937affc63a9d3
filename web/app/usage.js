// What a turn cost and how full the agent's context is (docs/web.md "Usage"): the tokens under an
// agent message, and the chat's context meter from the latest message that reports the context
// (relay-bridge's acp: agents, docs/bridge.md "Usage"). Pure helpers, and the meter's element.
import { h } from './ui.js';
import { madeAt } from './queued.js';

const count = (v) => (Number.isInteger(v) && v >= 0 ? v : null);

// 950, 42 k, 1.2 M: a token count short enough for a phone's line.
export function formatTokens(n) {
  if (n < 1000) return String(n);
  if (n < 1e6) return `${n < 1e4 ? (n / 1000).toFixed(1).replace(/\.0$/, '') : Math.round(n / 1000)} k`;
  return `${(n / 1e6).toFixed(1).replace(/\.0$/, '')} M`;
}

// The tokens a turn used, as a message's meta says it ("120 in · 30 out tokens"); '' when it reports none.
export function turnTokens(usage) {
  if (!usage || typeof usage !== 'object') return '';
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  const parts = [];
  if (input !== null) parts.push(`${formatTokens(input)} in`);
  if (output !== null) parts.push(`${formatTokens(output)} out`);
  if (!parts.length && count(usage.total_tokens) !== null) parts.push(formatTokens(usage.total_tokens));
  return parts.length ? `${parts.join(' · ')} tokens` : '';
}

// The context figures of a usage: { used, size, cost? } or null when it has none that hold.
export function contextOf(usage) {
  if (!usage || typeof usage !== 'object') return null;
  const used = count(usage.context_used);
  const size = count(usage.context_size);
  if (used === null || !size) return null;
  const c = usage.cost;
  const cost = c && typeof c === 'object' && typeof c.amount === 'number' && c.amount >= 0 && /^[A-Z]{3}$/.test(c.currency || '')
    ? { amount: c.amount, currency: c.currency } : null;
  return { used, size, cost };
}

// The context of the latest agent message (by created_at) that reports one; null when none does.
export function latestContext(messages) {
  let best = null;
  let at = -Infinity;
  for (const m of messages) {
    if (!m || m.role !== 'agent') continue;
    const context = contextOf(m.usage);
    if (context && madeAt(m) >= at) {
      best = context;
      at = madeAt(m);
    }
  }
  return best;
}

function costText(cost) {
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency: cost.currency, maximumFractionDigits: 2 }).format(cost.amount);
  } catch {
    return `${cost.amount.toFixed(2)} ${cost.currency}`;
  }
}

// The chat's context meter: "Context 42 k / 200 k" over a thin bar; hidden until a message reports the context.
export function contextMeter() {
  const label = h('span', { class: 'context-label' });
  const fill = h('span', { class: 'context-fill' });
  const el = h('div', { class: 'context-meter', hidden: true, role: 'meter', 'aria-valuemin': '0' },
    label, h('span', { class: 'context-bar', 'aria-hidden': 'true' }, fill));
  return {
    el,
    update(context) {
      el.hidden = !context;
      if (!context) return;
      const share = Math.min(1, context.used / context.size);
      const percent = Math.round(share * 100);
      label.textContent = `Context ${formatTokens(context.used)} / ${formatTokens(context.size)}${context.cost ? ` · ${costText(context.cost)}` : ''}`;
      fill.style.width = `${(share * 100).toFixed(1)}%`;
      el.classList.toggle('context-high', share >= 0.8);
      el.setAttribute('aria-valuemax', String(context.size));
      el.setAttribute('aria-valuenow', String(Math.min(context.used, context.size)));
      el.setAttribute('aria-label', `Context used: ${percent} percent`);
      el.setAttribute('aria-valuetext', `${context.used} of ${context.size} tokens (${percent}%)${context.cost ? `, ${costText(context.cost)} so far` : ''}`);
    },
  };
}
