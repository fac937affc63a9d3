// DOM helpers. Everything the app shows is built with createElement and
// textContent: no string of HTML is ever parsed, so no text from an agent, a
// user or the network can become markup or script (docs/web.md).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') el.className = value;
      else if (key === 'text') el.textContent = value;
      else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
      else if (key === 'dataset') Object.assign(el.dataset, value);
      else if (value === true) el.setAttribute(key, '');
      else el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// Keeps container's children in the order of items, creating each once by its
// key and updating it in place: a streaming reply changes one bubble, not the
// whole list.
export function reconcile(container, items, keyOf, create, update) {
  const existing = new Map();
  for (const child of container.children) if (child.dataset.key) existing.set(child.dataset.key, child);
  let cursor = container.firstElementChild;
  for (const item of items) {
    const key = keyOf(item);
    let el = existing.get(key);
    if (el) existing.delete(key);
    else {
      el = create(item);
      el.dataset.key = key;
    }
    update(el, item);
    if (el !== cursor) container.insertBefore(el, cursor);
    else cursor = cursor.nextElementSibling;
  }
  for (const el of existing.values()) el.remove();
}

let liveRegion = null;
// Says text to screen readers without moving focus.
export function announce(text, assertive = false) {
  if (!liveRegion) {
    liveRegion = h('div', { class: 'sr-only', 'aria-live': 'polite', role: 'status' });
    document.body.append(liveRegion);
  }
  liveRegion.setAttribute('aria-live', assertive ? 'assertive' : 'polite');
  liveRegion.textContent = '';
  setTimeout(() => { liveRegion.textContent = text; }, 30);
}

export function toast(text, kind = 'info') {
  let box = document.getElementById('toasts');
  if (!box) {
    box = h('div', { id: 'toasts', class: 'toasts', role: 'status', 'aria-live': 'polite' });
    document.body.append(box);
  }
  const item = h('div', { class: `toast toast-${kind}`, text });
  box.append(item);
  setTimeout(() => item.remove(), kind === 'error' ? 6000 : 3500);
}

// A modal question in a <dialog>: resolves with the chosen value, or null.
export function ask({ title, text, confirm = 'OK', cancel = 'Cancel', danger = false, input = null }) {
  return new Promise((resolve) => {
    const field = input
      ? h('input', { id: 'ask-input', type: 'text', value: input.value || '', maxlength: input.max || 200,
          placeholder: input.placeholder || '', autocomplete: 'off' })
      : null;
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'ask-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'ask-title', text: title }),
        text ? h('p', { text }) : null,
        field ? h('label', { for: 'ask-input', class: 'field-label', text: input.label }) : null,
        field,
        h('div', { class: 'dialog-actions' },
          h('button', { type: 'button', class: 'btn', value: 'cancel', onclick: () => dialog.close('cancel'), text: cancel }),
          h('button', { type: 'submit', class: danger ? 'btn btn-danger' : 'btn btn-primary', value: 'ok', text: confirm }))));
    dialog.addEventListener('close', () => {
      const ok = dialog.returnValue === 'ok';
      dialog.remove();
      resolve(ok ? (field ? field.value : true) : null);
    });
    document.body.append(dialog);
    dialog.showModal();
    if (field) field.select();
  });
}

export function formatTime(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  // A time is one word: "05:46 PM" never breaks before its PM (no-break spaces), nor "Nov 28".
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }).replace(/\s+/g, '\u00a0');
  return sameDay ? time : `${d.toLocaleDateString([], { month: 'short', day: 'numeric' }).replace(/\s+/g, '\u00a0')} ${time}`;
}

export function formatCountdown(ms) {
  if (ms <= 0) return '0:00';
  const s = Math.ceil(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

// An inline SVG icon from a path, built as DOM like everything else.
// Icons whose inner shapes are holes whichever way they are drawn.
const HOLLOW = new Set(['camera']);

export function icon(name) {
  const paths = {
    back: 'M15.4 7.4 14 6l-6 6 6 6 1.4-1.4L10.8 12z',
    send: 'M2 21 23 12 2 3v7l15 2-15 2z',
    attach: 'M16.5 6v11.5a4 4 0 0 1-8 0V5a2.5 2.5 0 0 1 5 0v10.5a1 1 0 0 1-2 0V6H10v9.5a2.5 2.5 0 0 0 5 0V5a4 4 0 0 0-8 0v12.5a5.5 5.5 0 0 0 11 0V6z',
    // Drawn even-odd (HOLLOW): the body, the lens cut out of it, a smaller lens inside (filled whole, it read as a blob).
    camera: 'M20 6h-3.2L15 4H9L7.2 6H4a2 2 0 0 0-2 2v11a2 2 0 0 0 2 2h16a2 2 0 0 0 2-2V8a2 2 0 0 0-2-2zM12 8.3a4.7 4.7 0 1 0 0 9.4 4.7 4.7 0 0 0 0-9.4zm0 2.2a2.5 2.5 0 1 1 0 5 2.5 2.5 0 0 1 0-5z',
    stop: 'M6 6h12v12H6z',
    mic: 'M12 14a3 3 0 0 0 3-3V5a3 3 0 0 0-6 0v6a3 3 0 0 0 3 3zm5.3-3a5.3 5.3 0 0 1-10.6 0H5c0 3.4 2.7 6.2 6 6.7V21h2v-3.3c3.3-.5 6-3.3 6-6.7z',
    inbox: 'M19 3H5a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h14a2 2 0 0 0 2-2V5a2 2 0 0 0-2-2zm0 12h-4a3 3 0 0 1-6 0H5V5h14z',
    chats: 'M4 4h16v12H5.2L4 17.2zm0-2a2 2 0 0 0-2 2v18l4-4h14a2 2 0 0 0 2-2V4a2 2 0 0 0-2-2z',
    machines: 'M4 6h16v10H4zm-2-2v14h8v2H8v2h8v-2h-2v-2h8V4z',
    shield: 'M12 2 4 5v6c0 5 3.4 9.7 8 11 4.6-1.3 8-6 8-11V5zm-1.4 14.6L7 13l1.4-1.4 2.2 2.2 5-5L17 10.2z',
    settings: 'M19.4 13a7.8 7.8 0 0 0 0-2l2.1-1.6-2-3.5-2.5 1a7.3 7.3 0 0 0-1.7-1L15 3h-4l-.4 2.9a7.3 7.3 0 0 0-1.7 1l-2.5-1-2 3.5L6.6 11a7.8 7.8 0 0 0 0 2l-2.1 1.6 2 3.5 2.5-1a7.3 7.3 0 0 0 1.7 1L11 21h4l.4-2.9a7.3 7.3 0 0 0 1.7-1l2.5 1 2-3.5zM13 15.5a3.5 3.5 0 1 1 0-7 3.5 3.5 0 0 1 0 7z',
    lock: 'M18 8h-1V6a5 5 0 0 0-10 0v2H6a2 2 0 0 0-2 2v10a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V10a2 2 0 0 0-2-2zM9 6a3 3 0 0 1 6 0v2H9z',
    plus: 'M19 13h-6v6h-2v-6H5v-2h6V5h2v6h6z',
    more: 'M12 8a2 2 0 1 0 0-4 2 2 0 0 0 0 4zm0 2a2 2 0 1 0 0 4 2 2 0 0 0 0-4zm0 6a2 2 0 1 0 0 4 2 2 0 0 0 0-4z',
    file: 'M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8zm-1 7V3.5L18.5 9z',
    // The kinds of tool call (transcript.js TASK_KINDS).
    read: 'M12 4.5C7 4.5 2.7 7.6 1 12c1.7 4.4 6 7.5 11 7.5s9.3-3.1 11-7.5c-1.7-4.4-6-7.5-11-7.5zM12 17a5 5 0 1 1 0-10 5 5 0 0 1 0 10zm0-8a3 3 0 1 0 0 6 3 3 0 0 0 0-6z',
    edit: 'M3 17.3V21h3.8L17.8 9.9l-3.7-3.7zM20.7 7a1 1 0 0 0 0-1.4l-2.3-2.3a1 1 0 0 0-1.4 0l-1.8 1.8 3.7 3.7z',
    delete: 'M6 19a2 2 0 0 0 2 2h8a2 2 0 0 0 2-2V7H6zM19 4h-3.5l-1-1h-5l-1 1H5v2h14z',
    move: 'M12 4l-1.4 1.4 5.6 5.6H4v2h12.2l-5.6 5.6L12 20l8-8z',
    search: 'M15.5 14h-.8l-.3-.3A6.5 6.5 0 1 0 9.5 16a6.5 6.5 0 0 0 4.2-1.6l.3.3v.8l5 5 1.5-1.5zm-6 0a4.5 4.5 0 1 1 0-9 4.5 4.5 0 0 1 0 9z',
    terminal: 'M20 4H4a2 2 0 0 0-2 2v12a2 2 0 0 0 2 2h16a2 2 0 0 0 2-2V6a2 2 0 0 0-2-2zm0 14H4V8h16zM6.4 16 5 14.6 7.6 12 5 9.4 6.4 8l4 4zM12 16h6v-2h-6z',
    think: 'M9 21a1 1 0 0 0 1 1h4a1 1 0 0 0 1-1v-1H9zm3-19a7 7 0 0 0-4 12.7V17a1 1 0 0 0 1 1h6a1 1 0 0 0 1-1v-2.3A7 7 0 0 0 12 2z',
    fetch: 'M5 20h14v-2H5zM19 9h-4V3H9v6H5l7 7z',
    mode: 'M7 11 3 15l4 4v-3h7v-2H7zm14-2-4-4v3h-7v2h7v3z',
    plan: 'M3 5h2v2H3zm4 0h14v2H7zM3 11h2v2H3zm4 0h14v2H7zm-4 6h2v2H3zm4 0h14v2H7z',
    tool: 'M22.7 19l-9.1-9.1c.9-2.3.4-5-1.5-6.9-2-2-5-2.4-7.4-1.3L9 6 6 9 1.6 4.7C.4 7.1.9 10.1 2.9 12.1c1.9 1.9 4.6 2.4 6.9 1.5l9.1 9.1c.4.4 1 .4 1.4 0l2.3-2.3c.5-.4.5-1.1.1-1.4z',
  };
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'icon');
  const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  path.setAttribute('d', paths[name] || '');
  if (HOLLOW.has(name)) path.setAttribute('fill-rule', 'evenodd');
  svg.append(path);
  return svg;
}

// Copies text to the clipboard: the Clipboard API where the page may use it, else a selected
// hidden textarea and execCommand (an older browser, a page not in a secure context).
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (err) {
      // denied: the fallback below may still work
    }
  }
  const area = h('textarea', { class: 'sr-only', readonly: true, 'aria-hidden': 'true' });
  area.value = text;
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch (err) {
    ok = false;
  }
  area.remove();
  return ok;
}

// A block of code with its language (when known) and a Copy button that says "Copied".
// A command's words as a code box shows them: a short word with a hyphen (relay-bridge, --server) is kept on
// one line, since a line broken after its hyphen reads as two words; anything else breaks where it must.
function codeWords(text) {
  return text.split(/(\s+)/).map((word) => (word.includes('-') && word.length <= 32 && !/\s/.test(word) ? h('span', { class: 'nobreak', text: word }) : word));
}

export function codeBox(text, language = '', label = 'Copy code') {
  const code = h('code', null, codeWords(text));
  if (language) code.className = `language-${language}`;
  // What the button says is part of its name (axe: label-content-name-mismatch): "Copy" and, for screen readers, what.
  const state = h('span', { class: 'code-copy-state', text: 'Copy' });
  const button = h('button', { type: 'button', class: 'code-copy' }, state, h('span', { class: 'sr-only', text: label.replace(/^Copy/, '') }),
);
  button.addEventListener('click', async () => {
    const ok = await copyText(text);
    state.textContent = ok ? 'Copied' : 'Copy failed';
    announce(ok ? 'Copied' : 'Copy failed');
    clearTimeout(button.timer);
    button.timer = setTimeout(() => { state.textContent = 'Copy'; }, 2000);
  });
  return h('div', { class: 'code-box' },
    h('div', { class: 'code-head' }, h('span', { class: 'code-lang', text: language }), button),
    h('pre', { class: 'code-block', tabindex: '0' }, code));
}
