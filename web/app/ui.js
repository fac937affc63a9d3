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
  return sameDay
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' +
      d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
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
export function icon(name) {
  const paths = {
    back: 'M15.4 7.4 14 6l-6 6 6 6 1.4-1.4L10.8 12z',
    send: 'M2 21 23 12 2 3v7l15 2-15 2z',
    attach: 'M16.5 6v11.5a4 4 0 0 1-8 0V5a2.5 2.5 0 0 1 5 0v10.5a1 1 0 0 1-2 0V6H10v9.5a2.5 2.5 0 0 0 5 0V5a4 4 0 0 0-8 0v12.5a5.5 5.5 0 0 0 11 0V6z',
    camera: 'M12 9a4 4 0 1 0 0 8 4 4 0 0 0 0-8zm8-3h-3.2L15 4H9L7.2 6H4a2 2 0 0 0-2 2v11a2 2 0 0 0 2 2h16a2 2 0 0 0 2-2V8a2 2 0 0 0-2-2z',
    stop: 'M6 6h12v12H6z',
    chats: 'M4 4h16v12H5.2L4 17.2zm0-2a2 2 0 0 0-2 2v18l4-4h14a2 2 0 0 0 2-2V4a2 2 0 0 0-2-2z',
    machines: 'M4 6h16v10H4zm-2-2v14h8v2H8v2h8v-2h-2v-2h8V4z',
    shield: 'M12 2 4 5v6c0 5 3.4 9.7 8 11 4.6-1.3 8-6 8-11V5zm-1.4 14.6L7 13l1.4-1.4 2.2 2.2 5-5L17 10.2z',
    settings: 'M19.4 13a7.8 7.8 0 0 0 0-2l2.1-1.6-2-3.5-2.5 1a7.3 7.3 0 0 0-1.7-1L15 3h-4l-.4 2.9a7.3 7.3 0 0 0-1.7 1l-2.5-1-2 3.5L6.6 11a7.8 7.8 0 0 0 0 2l-2.1 1.6 2 3.5 2.5-1a7.3 7.3 0 0 0 1.7 1L11 21h4l.4-2.9a7.3 7.3 0 0 0 1.7-1l2.5 1 2-3.5zM13 15.5a3.5 3.5 0 1 1 0-7 3.5 3.5 0 0 1 0 7z',
    plus: 'M19 13h-6v6h-2v-6H5v-2h6V5h2v6h6z',
    more: 'M12 8a2 2 0 1 0 0-4 2 2 0 0 0 0 4zm0 2a2 2 0 1 0 0 4 2 2 0 0 0 0-4zm0 6a2 2 0 1 0 0 4 2 2 0 0 0 0-4z',
    file: 'M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8zm-1 7V3.5L18.5 9z',
  };
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'icon');
  const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  path.setAttribute('d', paths[name] || '');
  svg.append(path);
  return svg;
}
