// One chat: the timeline (messages, tool calls, approvals), the composer with
// attachments, cancel, and the session's own actions.
import { api, post, patch, del, describe } from './api.js';
import { store, on, chat, loadHistory, installationName, inFlight, pollInFlight } from './state.js';
import { h, clear, reconcile, icon, toast, ask, announce, formatTime, formatSize } from './ui.js';
import { renderMarkdown } from './markdown.js';
import { approvalCard, autoApprove } from './approvals.js';
import { go } from './main.js';

const ATTACHMENTS_MAX = 10;
const ATTACHMENT_BYTES_MAX = 26214400;

function healthLabel(health) {
  return { healthy: 'Online', degraded: 'Not answering', offline: 'Offline' }[health] || 'Unknown';
}

export function healthPill(inst) {
  const health = inst ? (inst.state === 'revoked' ? 'revoked' : inst.health) : 'offline';
  return h('span', { class: `pill pill-${health}`, text: health === 'revoked' ? 'Disconnected' : healthLabel(health) });
}

function attachmentView(a) {
  const label = a.name || a.key;
  if (a.url && /^image\//.test(a.mime || '')) {
    return h('a', { class: 'attachment attachment-image', href: a.url, target: '_blank', rel: 'noopener' },
      h('img', { src: a.url, alt: label, loading: 'lazy' }));
  }
  return h('a', { class: 'attachment attachment-file', href: a.url || '#', download: a.name || '', target: '_blank', rel: 'noopener' },
    icon('file'), h('span', { text: `${label} (${formatSize(a.size || 0)})` }));
}

function messageEl() {
  return h('article', { class: 'msg' });
}

function updateMessage(el, m) {
  const text = m.text === ' ' && m.state === 'streaming' ? '' : m.text;
  const signature = `${m.state}|${text.length}|${text.slice(-64)}|${(m.attachments || []).length}|${m.finish_reason}`;
  if (el.dataset.signature === signature) return;
  el.dataset.signature = signature;
  el.className = `msg msg-${m.role} msg-${m.state}`;
  el.setAttribute('aria-label', m.role === 'user' ? 'You said' : 'Agent replied');
  clear(el);
  const body = h('div', { class: 'msg-body' });
  if (m.role === 'agent') body.append(renderMarkdown(text));
  else body.append(h('p', { class: 'msg-plain', text }));
  if (m.state === 'streaming') body.append(h('span', { class: 'typing', role: 'img', 'aria-label': 'still writing' }, h('i'), h('i'), h('i')));
  el.append(body);
  if (m.attachments && m.attachments.length)
    el.append(h('div', { class: 'attachments' }, m.attachments.map(attachmentView)));
  const meta = [formatTime(m.created_at)];
  if (m.finish_reason && m.finish_reason !== 'stop') meta.push(m.finish_reason === 'cancelled' ? 'cancelled' : `ended: ${m.finish_reason}`);
  if (m.usage && m.usage.model) meta.push(m.usage.model);
  el.append(h('div', { class: 'msg-meta', text: meta.join(' · ') }));
}

function taskEl() {
  return h('section', { class: 'task' });
}

function updateTask(el, t) {
  const signature = JSON.stringify([t.status, t.progress_percent, t.status_label, t.result, t.error]);
  if (el.dataset.signature === signature) return;
  el.dataset.signature = signature;
  clear(el);
  el.className = `task task-${t.status}`;
  const title = t.name || t.kind || 'Tool call';
  const status = { created: 'Started', progressing: 'Running', completed: 'Done', failed: 'Failed', cancelled: 'Cancelled' }[t.status] || t.status;
  el.setAttribute('aria-label', `Tool call ${title}: ${status}`);
  el.append(h('div', { class: 'task-head' },
    h('span', { class: 'task-kind', text: t.kind || 'tool' }),
    h('strong', { class: 'task-name', text: title }),
    h('span', { class: `pill pill-task-${t.status}`, text: status })));
  if (t.status_label) el.append(h('div', { class: 'task-label', text: t.status_label }));
  if (typeof t.progress_percent === 'number' && (t.status === 'progressing' || t.status === 'created'))
    el.append(h('progress', { max: '100', value: String(t.progress_percent), 'aria-label': `${Math.round(t.progress_percent)} percent` }));
  const detail = (label, value) => value === undefined || value === null ? null :
    h('details', { class: 'task-detail' }, h('summary', { text: label }),
      h('pre', { class: 'code-block', tabindex: '0' }, h('code', { text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) })));
  el.append(detail('Arguments', t.args), detail('Result', t.result), detail('Error', t.error));
}

// Timeline items of a session, in time order: messages, then each interaction's tools and approvals by time.
function timeline(sessionId) {
  const c = chat(sessionId);
  const items = [];
  for (const id of c.order) {
    const m = c.messages.get(id);
    items.push({ kind: 'message', key: `m:${id}`, at: m.created_at, value: m });
  }
  for (const t of c.tasks.values()) items.push({ kind: 'task', key: `t:${t.task_id}`, at: t.created_at, value: t });
  for (const a of store.approvals.values()) {
    if (a.session_id === sessionId) items.push({ kind: 'approval', key: `a:${a.approval_id}`, at: a.ts || a.seen_at, value: a });
  }
  items.sort((x, y) => x.at - y.at);
  return items;
}

export function chatView(main, sessionId) {
  const session = store.sessions.get(sessionId);
  const c = chat(sessionId);
  const pending = [];
  let streaming = null;
  let frame = 0;
  const subscriptions = [];

  if (!session) {
    main.append(h('div', { class: 'screen' },
      h('h1', { text: 'Chat not found' }),
      h('p', { text: store.deleted.has(sessionId) ? 'This chat was deleted. Restore it from the Chats screen.' : 'This chat does not exist, or it belongs to another account.' }),
      h('a', { class: 'btn', href: '#/', text: 'Back to chats' })));
    return null;
  }

  const title = h('h1', { class: 'chat-title' });
  const subtitle = h('div', { class: 'chat-subtitle' });
  const list = h('div', { class: 'timeline', role: 'log', 'aria-label': 'Messages', 'aria-live': 'off' });
  const older = h('button', { class: 'btn btn-quiet older', type: 'button', hidden: true, text: 'Show earlier messages',
    onclick: async () => {
      older.disabled = true;
      const before = list.scrollHeight;
      try {
        await loadHistory(sessionId, true);
        list.scrollTop += list.scrollHeight - before;
      } catch (err) {
        toast(describe(err), 'error');
      }
      older.disabled = false;
    } });
  const scroller = h('div', { class: 'scroller' }, older, list);
  const input = h('textarea', { id: 'composer-input', class: 'composer-input', rows: '1', placeholder: 'Message',
    'aria-label': 'Message', maxlength: '100000', enterkeyhint: 'send' });
  const attachInput = h('input', { type: 'file', multiple: true, class: 'sr-only', id: 'attach-file', tabindex: '-1', 'aria-hidden': 'true' });
  const cameraInput = h('input', { type: 'file', accept: 'image/*', capture: 'environment', class: 'sr-only', id: 'attach-camera', tabindex: '-1', 'aria-hidden': 'true' });
  const chips = h('div', { class: 'chips', 'aria-label': 'Attachments to send' });
  const send = h('button', { type: 'submit', class: 'icon-btn btn-primary', 'aria-label': 'Send' }, icon('send'));
  const cancel = h('button', { type: 'button', class: 'icon-btn btn-danger', 'aria-label': 'Stop the reply', hidden: true,
    onclick: async () => {
      try {
        await post(`/v1/me/sessions/${encodeURIComponent(sessionId)}/cancel`, streaming ? { interaction_id: streaming } : {});
        announce('Stop requested');
      } catch (err) {
        toast(describe(err), 'error');
      }
    } }, icon('stop'));
  const revoked = h('p', { class: 'notice', hidden: true, text: 'This machine was disconnected. Pair it again to keep chatting.' });
  const form = h('form', { class: 'composer', onsubmit: (e) => { e.preventDefault(); submit(); } },
    chips,
    h('div', { class: 'composer-row' },
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Attach a file', onclick: () => attachInput.click() }, icon('attach')),
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Take a photo', onclick: () => cameraInput.click() }, icon('camera')),
      input, cancel, send),
    attachInput, cameraInput);

  const menu = h('details', { class: 'menu' },
    h('summary', { class: 'icon-btn', 'aria-label': 'Chat actions' }, icon('more')),
    h('div', { class: 'menu-items', role: 'menu' },
      h('button', { type: 'button', role: 'menuitem', text: 'Rename', onclick: () => rename() }),
      h('button', { type: 'button', role: 'menuitem', class: 'archive-action', onclick: () => toggleArchive() }),
      h('button', { type: 'button', role: 'menuitem', class: 'danger', text: 'Delete', onclick: () => remove() })));

  main.append(h('div', { class: 'chat' },
    h('header', { class: 'chat-header' },
      h('a', { class: 'icon-btn back', href: '#/', 'aria-label': 'Back to chats' }, icon('back')),
      h('div', { class: 'chat-heading' }, title, subtitle),
      menu),
    scroller, revoked, form));

  function header() {
    const s = store.sessions.get(sessionId) || session;
    const inst = store.installations.get(s.installation_id);
    title.textContent = s.title || 'Untitled chat';
    clear(subtitle);
    subtitle.append(h('span', { text: `${inst && inst.custom_emoji ? `${inst.custom_emoji} ` : ''}${installationName(inst)}` }), ' ', healthPill(inst));
    if (s.state === 'archived') subtitle.append(' ', h('span', { class: 'pill', text: 'Archived' }));
    menu.querySelector('.archive-action').textContent = s.state === 'archived' ? 'Unarchive' : 'Archive';
    const gone = !inst || inst.state === 'revoked';
    revoked.hidden = !gone;
    input.disabled = gone;
    send.disabled = gone;
    document.title = `${title.textContent} · Relay`;
  }

  function nearBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  }

  // Whether the reader follows the end of the chat; kept from their last scroll, since a picture that
  // finishes loading grows the list after the draw that added it.
  let stuck = true;
  scroller.addEventListener('scroll', () => { stuck = nearBottom(); }, { passive: true });
  list.addEventListener('load', () => { if (stuck) scroller.scrollTop = scroller.scrollHeight; }, true);

  function draw() {
    frame = 0;
    const stick = stuck || nearBottom();
    reconcile(list, timeline(sessionId), (item) => item.key,
      (item) => (item.kind === 'message' ? messageEl() : item.kind === 'task' ? taskEl() : approvalCard.create(item.value)),
      (el, item) => (item.kind === 'message' ? updateMessage(el, item.value) : item.kind === 'task' ? updateTask(el, item.value) : approvalCard.update(el, item.value)));
    older.hidden = !c.hasMore;
    const open = inFlight(sessionId);
    const agentStreaming = [...c.messages.values()].find((m) => m.role === 'agent' && m.state === 'streaming');
    streaming = agentStreaming ? agentStreaming.interaction_id : open[open.length - 1] || null;
    cancel.hidden = !streaming;
    if (stick) scroller.scrollTop = scroller.scrollHeight;
  }

  // Deltas arrive faster than a screen refreshes: one draw per frame.
  function schedule() {
    if (!frame) frame = requestAnimationFrame(draw);
  }

  async function upload(file) {
    if (file.size > ATTACHMENT_BYTES_MAX) throw new Error(`${file.name} is larger than 25 MB`);
    return api('POST', `/v1/me/attachments?name=${encodeURIComponent(file.name || 'photo.jpg')}`,
      { raw: file, contentType: file.type || 'application/octet-stream' });
  }

  function addFiles(files) {
    for (const file of files) {
      if (pending.length >= ATTACHMENTS_MAX) {
        toast(`At most ${ATTACHMENTS_MAX} attachments per message`, 'error');
        break;
      }
      const entry = { file, state: 'uploading', result: null };
      pending.push(entry);
      entry.promise = upload(file).then((result) => {
        entry.state = 'ready';
        entry.result = result;
      }, (err) => {
        entry.state = 'failed';
        toast(describe(err), 'error');
      }).finally(drawChips);
    }
    drawChips();
  }

  function drawChips() {
    clear(chips);
    for (const entry of pending) {
      const preview = /^image\//.test(entry.file.type) ? h('img', { src: URL.createObjectURL(entry.file), alt: '' }) : icon('file');
      chips.append(h('span', { class: `chip chip-${entry.state}` }, preview,
        h('span', { text: `${entry.file.name || 'photo'}${entry.state === 'uploading' ? ' (uploading…)' : entry.state === 'failed' ? ' (failed)' : ''}` }),
        h('button', { type: 'button', class: 'chip-remove', 'aria-label': `Remove ${entry.file.name || 'photo'}`, text: '×',
          onclick: () => { pending.splice(pending.indexOf(entry), 1); drawChips(); } })));
    }
  }

  async function submit() {
    const text = input.value.trim();
    if (!text && pending.length === 0) return;
    send.disabled = true;
    try {
      await Promise.all(pending.map((entry) => entry.promise));
      const attachments = pending.filter((e) => e.state === 'ready').map((e) => ({ key: e.result.key }));
      if (!text && attachments.length === 0) return;
      await post(`/v1/me/sessions/${encodeURIComponent(sessionId)}/send`, { text, attachments });
      input.value = '';
      pending.length = 0;
      drawChips();
      resize();
      scroller.scrollTop = scroller.scrollHeight;
    } catch (err) {
      toast(describe(err), 'error');
    } finally {
      send.disabled = false;
      input.focus();
    }
  }

  function resize() {
    input.style.height = 'auto';
    input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
  }

  async function rename() {
    menu.open = false;
    const s = store.sessions.get(sessionId);
    const value = await ask({ title: 'Rename chat', confirm: 'Rename', input: { label: 'Title', value: s.title || '', max: 200 } });
    if (value === null) return;
    try {
      await patch(`/v1/me/sessions/${encodeURIComponent(sessionId)}`, { title: value.trim() || null });
    } catch (err) {
      toast(describe(err), 'error');
    }
  }

  async function toggleArchive() {
    menu.open = false;
    const s = store.sessions.get(sessionId);
    try {
      await post(`/v1/me/sessions/${encodeURIComponent(sessionId)}/${s.state === 'archived' ? 'unarchive' : 'archive'}`, {});
      toast(s.state === 'archived' ? 'Chat moved back to your chats' : 'Chat archived');
    } catch (err) {
      toast(describe(err), 'error');
    }
  }

  async function remove() {
    menu.open = false;
    const ok = await ask({ title: 'Delete this chat?', text: 'You can restore it from the Chats screen for a day.', confirm: 'Delete', danger: true });
    if (!ok) return;
    try {
      await del(`/v1/me/sessions/${encodeURIComponent(sessionId)}`);
      toast('Chat deleted');
      go('/');
    } catch (err) {
      toast(describe(err), 'error');
    }
  }

  input.addEventListener('input', resize);
  input.addEventListener('keydown', (e) => {
    // Enter sends on a keyboard; Shift+Enter (and a phone's return key with enterkeyhint) make a new line.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && window.matchMedia('(pointer: fine)').matches) {
      e.preventDefault();
      submit();
    }
  });
  attachInput.addEventListener('change', () => { addFiles([...attachInput.files]); attachInput.value = ''; });
  cameraInput.addEventListener('change', () => { addFiles([...cameraInput.files]); cameraInput.value = ''; });
  const closeMenu = (e) => {
    if (menu.open && !menu.contains(e.target)) menu.open = false;
  };
  document.addEventListener('click', closeMenu);

  subscriptions.push(on(`messages:${sessionId}`, (id) => {
    schedule();
    const m = id && c.messages.get(id);
    if (m && m.role === 'agent' && m.state === 'final' && m.finalized_at && Date.now() - m.finalized_at < 5000) announce('Reply finished');
  }));
  subscriptions.push(on('sessions', () => {
    if (!store.sessions.has(sessionId)) {
      if (store.deleted.has(sessionId)) go('/');
      return;
    }
    header();
  }));
  subscriptions.push(on('installations', header));
  subscriptions.push(on('approvals', (id) => {
    const a = id && store.approvals.get(id);
    if (a && a.session_id === sessionId) {
      autoApprove(a);
      schedule();
    }
  }));
  const ticker = setInterval(() => {
    for (const el of list.querySelectorAll('.approval-pending')) approvalCard.tick(el);
  }, 1000);

  header();
  if (!c.loaded) {
    loadHistory(sessionId).then(() => {
      if (inFlight(sessionId).length) pollInFlight(sessionId);
    }, (err) => toast(describe(err), 'error'));
  }
  draw();
  scroller.scrollTop = scroller.scrollHeight;
  for (const a of store.approvals.values()) if (a.session_id === sessionId) autoApprove(a);
  if (window.matchMedia('(pointer: fine)').matches) input.focus({ preventScroll: true });

  return () => {
    for (const unsubscribe of subscriptions) unsubscribe();
    clearInterval(ticker);
    document.removeEventListener('click', closeMenu);
    if (frame) cancelAnimationFrame(frame);
    document.title = 'Relay';
  };
}
