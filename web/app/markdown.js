// Markdown to DOM, for agents' replies. It builds elements and text nodes
// only (never innerHTML), keeps links to http, https and mailto, and shows
// anything else as the text it is: nothing an agent writes can run script.
// A small subset, the one chat replies use: paragraphs, headings, fenced and
// indented code (with a language label and a Copy button), GFM pipe tables,
// lists, quotes, rules, emphasis, inline code and links.
// It parses a reply in full on each render; a render per animation frame of
// a streaming reply of a few kilobytes costs well under a millisecond.
import { h, codeBox } from './ui.js';

const SAFE_URL = /^(https?:|mailto:)/i;
// A link within the relay itself (an attachment): a single '/', then a path.
// Browsers read '//host' and '/\host' as another host, and drop tabs and line
// breaks anywhere in a URL before reading it ('/\t/host' is '//host'), so a
// URL with a control character is no link at all.
const INTERNAL_URL = /^\/(?![/\\])/;
const CONTROL = /[\u0000-\u001f\u007f]/;

// The href a markdown link may carry, or null: then it is shown as text.
export function safeHref(url) {
  const trimmed = url.trim();
  if (CONTROL.test(trimmed)) return null;
  if (SAFE_URL.test(trimmed)) return trimmed;
  if (INTERNAL_URL.test(trimmed)) return trimmed;
  return null;
}

// Inline markup: `code`, **strong**, *em* or _em_, ~~del~~, [text](url), <url>, bare https:// links.
function inline(text) {
  const out = [];
  let i = 0;
  let plain = '';
  const flush = () => {
    if (plain) out.push(plain);
    plain = '';
  };
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    let m;
    if (c === '\\' && i + 1 < text.length && /[\\`*_{}[\]()#+\-.!~<>]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '`' && (m = rest.match(/^(`+)([\s\S]*?[^`])\1(?!`)/))) {
      flush();
      out.push(h('code', { text: m[2].replace(/^ (.*) $/, '$1') }));
      i += m[0].length;
      continue;
    }
    if ((c === '*' || c === '_') && (m = rest.match(/^(\*\*|__)(?=\S)([\s\S]*?\S)\1/))) {
      flush();
      out.push(h('strong', null, inline(m[2])));
      i += m[0].length;
      continue;
    }
    if ((c === '*' || c === '_') && (m = rest.match(/^(\*|_)(?=\S)([\s\S]*?\S)\1(?!\1)/)) &&
        (c === '*' || i === 0 || !/\w/.test(text[i - 1]))) {
      flush();
      out.push(h('em', null, inline(m[2])));
      i += m[0].length;
      continue;
    }
    if (c === '~' && (m = rest.match(/^~~(?=\S)([\s\S]*?\S)~~/))) {
      flush();
      out.push(h('del', null, inline(m[1])));
      i += m[0].length;
      continue;
    }
    if (c === '[' && (m = rest.match(/^\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)/))) {
      flush();
      const href = safeHref(m[2]);
      out.push(href ? h('a', { href, target: '_blank', rel: 'noopener noreferrer nofollow' }, inline(m[1])) : m[0]);
      i += m[0].length;
      continue;
    }
    if (c === '<' && (m = rest.match(/^<(https?:\/\/[^>\s]+)>/))) {
      flush();
      out.push(h('a', { href: m[1], target: '_blank', rel: 'noopener noreferrer nofollow', text: m[1] }));
      i += m[0].length;
      continue;
    }
    if ((c === 'h' || c === 'H') && (i === 0 || /[\s(]/.test(text[i - 1])) &&
        (m = rest.match(/^https?:\/\/[^\s<]+[^\s<.,:;"')\]]/i))) {
      flush();
      out.push(h('a', { href: m[0], target: '_blank', rel: 'noopener noreferrer nofollow', text: m[0] }));
      i += m[0].length;
      continue;
    }
    if (c === '\n') {
      // A line break inside a paragraph: two trailing spaces or a backslash make it hard.
      if (/ {2,}$/.test(plain)) {
        plain = plain.replace(/ +$/, '');
        flush();
        out.push(h('br'));
      } else {
        plain += '\n';
      }
      i += 1;
      continue;
    }
    plain += c;
    i += 1;
  }
  flush();
  return out;
}

// ---- GFM pipe tables (pure: unit-tested without a DOM) ----

// The cells of a table row: split at each '|' that is neither escaped nor inside a code span;
// the outer pipes are optional. '\|' in a cell is a literal pipe.
export function splitRow(line) {
  let text = line.trim();
  if (text.startsWith('|')) text = text.slice(1);
  if (text.endsWith('|') && !text.endsWith('\\|')) text = text.slice(0, -1);
  const cells = [];
  let cell = '';
  let ticks = 0; // the length of the open code span's backtick run, 0 outside one
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\\' && text[i + 1] === '|') {
      cell += ticks ? '\\|' : '|';
      i += 1;
      continue;
    }
    if (c === '`') {
      let run = 1;
      while (text[i + run] === '`') run += 1;
      if (!ticks) ticks = run;
      else if (ticks === run) ticks = 0;
      cell += text.slice(i, i + run);
      i += run - 1;
      continue;
    }
    if (c === '|' && !ticks) {
      cells.push(cell.trim());
      cell = '';
      continue;
    }
    cell += c;
  }
  cells.push(cell.trim());
  return cells;
}

// The alignments a delimiter row sets ('left', 'right', 'center' or ''), or null when the line is not one.
export function delimiterRow(line) {
  if (!line.includes('-') || !/^\s*\|?[\s:|-]+\|?\s*$/.test(line)) return null;
  const cells = splitRow(line);
  const aligns = [];
  for (const cell of cells) {
    if (!/^:?-+:?$/.test(cell)) return null;
    const left = cell.startsWith(':');
    const right = cell.endsWith(':');
    aligns.push(left && right ? 'center' : right ? 'right' : left ? 'left' : '');
  }
  return aligns;
}

// The table that starts at lines[i], or null: { aligns, header, rows, end } with every row as many
// cells as the header (missing ones empty, extra ones dropped, as GFM does); `end` is the line after it.
export function tableAt(lines, i) {
  const head = lines[i];
  if (i + 1 >= lines.length || !head.includes('|')) return null;
  const aligns = delimiterRow(lines[i + 1]);
  if (!aligns) return null;
  const header = splitRow(head);
  if (header.length !== aligns.length) return null;
  const fit = (cells) => header.map((_, k) => (k < cells.length ? cells[k] : ''));
  const rows = [];
  let j = i + 2;
  while (j < lines.length && !/^\s*$/.test(lines[j]) && lines[j].includes('|') && !FENCE.test(lines[j]) && !QUOTE.test(lines[j])) {
    rows.push(fit(splitRow(lines[j])));
    j += 1;
  }
  return { aligns, header, rows, end: j };
}

function tableView(table) {
  // A short cell stays on one line ("12 KB"); a long one wraps, from a width that keeps it readable.
  const cell = (tag, text, k) => h(tag, { class: [table.aligns[k] ? `align-${table.aligns[k]}` : '', text.length > 24 ? 'cell-long' : ''].join(' ').trim() || null,
    scope: tag === 'th' ? 'col' : null }, inline(text));
  // The box scrolls sideways, not the page: a wide table on a narrow screen.
  return h('div', { class: 'table-box', tabindex: '0', role: 'region', 'aria-label': 'Table' },
    h('table', null,
      h('thead', null, h('tr', null, table.header.map((text, k) => cell('th', text, k)))),
      table.rows.length ? h('tbody', null, table.rows.map((row) => h('tr', null, row.map((text, k) => cell('td', text, k))))) : null));
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^( {0,3})([-*+])\s+(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (/^\s*$/.test(line)) {
      i += 1;
      continue;
    }
    if ((m = line.match(FENCE))) {
      const fence = m[1];
      const body = [];
      i += 1;
      while (i < lines.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(lines[i])) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1; // the closing fence (or the end of a reply still streaming)
      out.push(codeBox(body.join('\n'), m[2]));
      continue;
    }
    if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || /^\s*$/.test(lines[i]))) {
        body.push(lines[i].replace(/^( {4}|\t)/, ''));
        i += 1;
      }
      while (body.length && /^\s*$/.test(body[body.length - 1])) body.pop();
      out.push(codeBox(body.join('\n')));
      continue;
    }
    let table;
    if ((table = tableAt(lines, i))) {
      out.push(tableView(table));
      i = table.end;
      continue;
    }
    if ((m = line.match(HEADING))) {
      // Headings inside a message stay below the page's own: h3 to h6.
      const level = Math.min(m[1].length + 2, 6);
      out.push(h(`h${level}`, null, inline(m[2])));
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      out.push(h('hr'));
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = lines[i].match(QUOTE))) {
        body.push(m[1]);
        i += 1;
      }
      out.push(h('blockquote', null, blocks(body)));
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      const ordered = ORDERED.test(line);
      const pattern = ordered ? ORDERED : BULLET;
      const list = h(ordered ? 'ol' : 'ul');
      if (ordered) {
        const start = Number(line.match(ORDERED)[2]);
        if (start !== 1) list.setAttribute('start', String(start));
      }
      while (i < lines.length && (m = lines[i].match(pattern))) {
        const item = [m[3]];
        i += 1;
        // Continuation lines are indented; a nested list goes with its item.
        while (i < lines.length && /^( {2,}|\t)\S/.test(lines[i]) && !pattern.test(lines[i])) {
          item.push(lines[i].replace(/^( {2,4}|\t)/, ''));
          i += 1;
        }
        while (i < lines.length && /^( {2,}|\t)([-*+]|\d+[.)])\s/.test(lines[i])) {
          item.push(lines[i].replace(/^( {2,4}|\t)/, ''));
          i += 1;
        }
        const task = item[0].match(/^\[([ xX])\]\s+(.*)$/);
        const li = h('li');
        if (task) {
          li.append(h('input', { type: 'checkbox', disabled: true, checked: task[1] !== ' ', 'aria-label': 'done' }), ' ');
          item[0] = task[2];
        }
        if (item.length === 1) li.append(...inline(item[0]));
        else li.append(...blocks(item));
        list.append(li);
        if (i < lines.length && /^\s*$/.test(lines[i]) && i + 1 < lines.length && pattern.test(lines[i + 1])) i += 1;
      }
      out.push(list);
      continue;
    }
    const para = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) &&
           !QUOTE.test(lines[i]) && !RULE.test(lines[i]) && !(para.length && (BULLET.test(lines[i]) || ORDERED.test(lines[i]))) &&
           !(para.length && tableAt(lines, i))) {
      para.push(lines[i]);
      i += 1;
    }
    out.push(h('p', null, inline(para.join('\n'))));
  }
  return out;
}

// The rendered markdown as a fragment.
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  fragment.append(...blocks(String(text).replace(/\r\n?/g, '\n').split('\n')));
  return fragment;
}
