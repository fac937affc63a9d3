// One chat: the timeline (messages, tool calls, approvals), the composer with
// attachments, cancel, and the session's own actions.
import { api, post, patch, del, describe } from './api.js';
import { store, on, chat, loadHistory, installationName, inFlight, pollInFlight, relayReachable } from './state.js';
import { h, append, clear, reconcile, icon, toast, ask, announce, formatTime, formatSize } from './ui.js';
import { renderMarkdown } from './markdown.js';
import { approvalCard, autoApprove } from './approvals.js';
import { capabilityTray } from './capabilities.js';
import { filesButton } from './files.js';
import { taskCard } from './toolcall.js';
import { itemAt, orderItems, endsTurn, isHiddenMessage, isHeldBubble, settledMessages, agentLabel } from './transcript.js';
import { commandQuery, filterCommands, commandIn } from './commands.js';
import { go } from './nav.js';
import { queueMessage, outboxOf, statusText, retryMessage, discardMessage } from './outbox.js';
import { titleBody, hasKey, onKeys, uploadBody, sealedFile } from './e2e.js';
import { dictation } from './dictation.js';
import { turnTokens, latestContext, contextMeter } from './usage.js';
import { queuedTurns } from './queued.js';
import { agentBar } from './steer.js';
import { isEarlier, earlierText, refusalOf } from './agents.js';

const ATTACHMENTS_MAX = 10;
const ATTACHMENT_BYTES_MAX = 26214400;

function healthLabel(health) {
  return { healthy: 'Online', degraded: 'Not answering', offline: 'Offline' }[health] || 'Unknown';
}

export function healthPill(inst) {
  // With the relay out of reach, what it last said of the machine is no news: not "Online".
  if (inst && inst.state !== 'revoked' && !relayReachable()) return h('span', { class: 'pill pill-unknown', text: 'Status unknown' });
  const health = inst ? (inst.state === 'revoked' ? 'revoked' : inst.health) : 'offline';
  return h('span', { class: `pill pill-${health}`, text: health === 'revoked' ? 'Disconnected' : healthLabel(health) });
}

// A sealed attachment (an encrypted session's): its link serves the envelope, so it is fetched and
// opened here when asked for, and shown from a local blob URL.
function sealedAttachmentView(a) {
  const label = a.name || a.key;
  const link = h('a', { class: 'attachment attachment-file attachment-sealed', href: '#', download: a.name || '' },
    icon('file'), h('span', { text: `${label} (${formatSize(a.size || 0)})` }));
  link.onclick = async (event) => {
    if (link.dataset.opened) return;
    event.preventDefault();
    try {
      link.href = URL.createObjectURL(await sealedFile(a.session_id, a));
      link.dataset.opened = '1';
      link.click();
    } catch (err) {
      toast(describe(err), 'error');
    }
  };
  return link;
}

function attachmentView(a) {
  const label = a.name || a.key;
  if (a.sealed) return sealedAttachmentView(a);
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

// settled: something of its turn follows it, so no more text comes to it (transcript.js settledMessages).
// queued: a user message waiting for an earlier turn of the chat to end (queued.js).
function updateMessage(el, m, settled, queued) {
  const text = m.text === ' ' && m.state === 'streaming' ? '' : m.text;
  const earlier = isEarlier(m);
  const tokens = m.role === 'agent' ? turnTokens(m.usage) : '';
  const signature = `${m.state}|${text.length}|${text.slice(-64)}|${(m.attachments || []).length}|${m.finish_reason}|${settled}|${queued}|${tokens}|${earlier}`;
  if (el.dataset.signature === signature) return;
  el.dataset.signature = signature;
  // The agent's own earlier history (a session continued here, docs/web.md): shown apart, dimmed.
  el.className = `msg msg-${m.role} msg-${m.state}${queued ? ' msg-queued' : ''}${earlier ? ' msg-earlier' : ''}`;
  el.setAttribute('aria-label', m.role === 'user' ? 'You said' : 'Agent replied');
  clear(el);
  const body = h('div', { class: 'msg-body' });
  if (m.role === 'agent') body.append(renderMarkdown(earlier ? earlierText(text) : text));
  else body.append(h('p', { class: 'msg-plain', text }));
  if (m.state === 'streaming' && !settled) body.append(h('span', { class: 'typing', role: 'img', 'aria-label': 'still writing' }, h('i'), h('i'), h('i')));
  el.append(body);
  if (m.attachments && m.attachments.length)
    el.append(h('div', { class: 'attachments' }, m.attachments.map(attachmentView)));
  const meta = earlier ? ['Earlier, before this chat', formatTime(m.created_at)] : [formatTime(m.created_at)];
  // A reply that paused for a tool call goes on in the next message (docs/bridge.md "acp:COMMAND"): nothing to say about its end.
  if (m.finish_reason && m.finish_reason !== 'stop' && m.finish_reason !== 'tool_call') meta.push(m.finish_reason === 'cancelled' ? 'cancelled' : `ended: ${m.finish_reason}`);
  if (m.usage && m.usage.model) meta.push(m.usage.model);
  if (tokens) meta.push(tokens);
  el.append(h('div', { class: 'msg-meta' }, meta.join(' · '),
    queued ? h('span', { class: 'pill pill-queued', title: 'Sent when the agent has answered the message before it', text: 'Queued' }) : null));
}

// Timeline items of a session in the order things happened (transcript.js): messages, tool calls, approvals.
function timeline(sessionId) {
  const c = chat(sessionId);
  const items = [];
  const waiting = new Set();
  for (const a of store.approvals.values()) if (a.session_id === sessionId && a.status === 'pending') waiting.add(a.interaction_id);
  const queued = queuedTurns(c.messages.values());
  for (const id of c.order) {
    const m = c.messages.get(id);
    if (isHiddenMessage(m) || isHeldBubble(m, waiting)) continue;
    // A queued turn's reply is an empty placeholder: no dots for a reply not begun (queued.js).
    if (m.role === 'agent' && queued.has(m.interaction_id) && !/\S/.test(m.text || '')) continue;
    items.push({ type: 'message', id, key: `m:${id}`, at: itemAt(m), tie: m.tie, value: m });
  }
  for (const t of c.tasks.values()) items.push({ type: 'task', id: t.task_id, key: `t:${t.task_id}`, at: itemAt(t), tie: t.tie, value: t });
  for (const a of store.approvals.values()) {
    if (a.session_id === sessionId) items.push({ type: 'approval', id: a.approval_id, key: `a:${a.approval_id}`, at: itemAt(a), tie: a.tie, value: a });
  }
  const ordered = orderItems(items);
  const settled = settledMessages(ordered);
  for (const item of ordered) {
    item.settled = settled.has(item.id);
    item.queued = item.type === 'message' && item.value.role === 'user' && queued.has(item.value.interaction_id);
  }
  return ordered;
}

// at: the key of an item to show (`m:`, `t:`, `a:` + its id, or `c:` + a capability request's),
// scrolled to and highlighted once drawn: the inbox opens a chat there (docs/web.md "Inbox").
export function chatView(main, sessionId, at = null) {
  const session = store.sessions.get(sessionId);
  const c = chat(sessionId);
  const pending = [];
  let streaming = null;
  let frame = 0;
  const subscriptions = [];

  if (!session && !store.user) {
    // Started while the relay was away: nothing is known of the chat yet, but what waits to be sent is here.
    const waiting = outboxOf(sessionId);
    main.append(h('div', { class: 'screen' },
      h('h1', { text: 'Waiting for the relay' }),
      h('p', { text: 'The relay cannot be reached. This chat opens when it answers again.' }),
      waiting.length ? h('p', { text: `${waiting.length === 1 ? 'One message waits' : `${waiting.length} messages wait`} to be sent from this device:` }) : null,
      waiting.length ? h('ul', { class: 'outbox-waiting' }, waiting.map((e) => h('li', { class: 'outbox-waiting-item', text: e.text }))) : null));
    return null;
  }

  if (!session) {
    main.append(h('div', { class: 'screen' },
      h('h1', { text: 'Chat not found' }),
      h('p', { text: store.deleted.has(sessionId) ? 'This chat was deleted. Restore it from the Chats screen.' : 'This chat does not exist, or it belongs to another account.' }),
      h('a', { class: 'btn', href: '#/', text: 'Back to chats' })));
    // A chat made a moment ago (on another device, or a link that came before the list) opens once the list has it.
    return on('sessions', () => {
      if (store.sessions.has(sessionId)) window.dispatchEvent(new HashChangeEvent('hashchange'));
    });
  }

  const title = h('h1', { class: 'chat-title' });
  const subtitle = h('div', { class: 'chat-subtitle' });
  const list = h('div', { class: 'timeline', role: 'log', 'aria-label': 'Messages', 'aria-live': 'off' });
  const older = h('button', { class: 'btn btn-quiet older', type: 'button', hidden: true, text: 'Show earlier messages',
    onclick: () => loadOlder() });
  // Messages not yet with the relay (outbox.js), after the timeline.
  const outboxList = h('div', { class: 'outbox', 'aria-label': 'Not sent yet' });
  // A chat with nothing in it yet says what to do (drawEmpty).
  const emptyState = h('div', { class: 'chat-empty', hidden: true });
  const scroller = h('div', { class: 'scroller' }, older, emptyState, list, outboxList);
  const input = h('textarea', { id: 'composer-input', class: 'composer-input', rows: '1', placeholder: 'Message',
    'aria-label': 'Message', maxlength: '100000', enterkeyhint: 'send',
    'aria-autocomplete': 'list', 'aria-controls': 'composer-commands', 'aria-describedby': 'composer-hint' });
  // The agent's commands, offered when the message starts with "/" (commands.js).
  const commandList = h('ul', { id: 'composer-commands', class: 'commands', role: 'listbox', 'aria-label': 'Agent commands', hidden: true });
  const hint = h('p', { id: 'composer-hint', class: 'composer-hint', hidden: true });
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
  // Where the browser recognises speech: a microphone that writes into the composer (dictation.js).
  const dictate = dictation(input);
  const form = h('form', { class: 'composer', onsubmit: (e) => { e.preventDefault(); submit(); } },
    commandList, hint,
    chips,
    h('div', { class: 'composer-row' },
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Attach a file', onclick: () => attachInput.click() }, icon('attach')),
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Take a photo', onclick: () => cameraInput.click() }, icon('camera')),
      input, dictate && dictate.button, cancel, send),
    attachInput, cameraInput);

  const menu = h('details', { class: 'menu' },
    h('summary', { class: 'icon-btn', 'aria-label': 'Chat actions' }, icon('more')),
    h('div', { class: 'menu-items', role: 'menu' },
      h('button', { type: 'button', role: 'menuitem', text: 'Rename', onclick: () => rename() }),
      h('button', { type: 'button', role: 'menuitem', class: 'archive-action', onclick: () => toggleArchive() }),
      h('button', { type: 'button', role: 'menuitem', class: 'danger', text: 'Delete', onclick: () => remove() })));

  const tray = capabilityTray(sessionId);
  // How full the agent's context is, from the latest reply that says (usage.js).
  const meter = contextMeter();
  // What the session changed (files.js): a count here, the Files view behind it.
  const filesLink = filesButton(sessionId);
  // The agent, its folder and branch, its refusal, and its mode, model and effort (steer.js).
  const bar = agentBar(sessionId);
  main.append(h('div', { class: 'chat' },
    h('header', { class: 'chat-header' },
      h('a', { class: 'icon-btn back', href: '#/', 'aria-label': 'Back to chats' }, icon('back')),
      h('div', { class: 'chat-heading' }, title, subtitle, meter.el),
      filesLink.el, menu),
    bar.el,
    scroller, tray.el, revoked, form));

  function header() {
    const s = store.sessions.get(sessionId) || session;
    const inst = store.installations.get(s.installation_id);
    title.textContent = s.title || 'Untitled chat';
    clear(subtitle);
    subtitle.append(h('span', { text: `${inst && inst.custom_emoji ? `${inst.custom_emoji} ` : ''}${installationName(inst)}` }), ' ', healthPill(inst));
    if (s.state === 'archived') subtitle.append(' ', h('span', { class: 'pill', text: 'Archived' }));
    // End-to-end encrypted (docs/web.md): the relay carries this chat's text sealed; without the key yet, it says so.
    if (s.encrypted) {
      subtitle.append(' ', h('span', { class: 'pill pill-lock', title: 'End-to-end encrypted: the relay cannot read this chat' },
        icon('lock'), ' Encrypted'));
      if (!hasKey(sessionId)) subtitle.append(' ', h('span', { class: 'pill pill-warn', text: 'Waiting for this device to receive the key…' }));
    }
    // The agent's mode (ACP's current_mode_update, docs/bridge.md "acp:COMMAND"): "plan" and "default" behave very
    // differently. A bridge that reports the session's own state gets the pickers of the agent bar instead.
    const mode = inst && inst.agent && typeof inst.agent.mode === 'string' ? inst.agent.mode : '';
    if (mode && !bar.steered()) subtitle.append(' ', h('span', { class: 'pill pill-mode', text: `Mode: ${mode}` }));
    bar.draw();
    menu.querySelector('.archive-action').textContent = s.state === 'archived' ? 'Unarchive' : 'Archive';
    const gone = !inst || inst.state === 'revoked';
    revoked.hidden = !gone;
    // A session the bridge refused (a folder outside its roots, say) runs nothing: the bar says why, and nothing is sent.
    const refused = refusalOf(s.agent_state);
    const closed = gone || !!(refused && refused.refused);
    input.disabled = closed;
    send.disabled = closed;
    if (dictate) dictate.button.disabled = closed;
    document.title = `${title.textContent} · Relay`;
  }

  // The page before the oldest one shown, keeping in view what the reader was looking at.
  async function loadOlder() {
    if (!c.hasMore || c.loading || older.disabled) return;
    older.disabled = true;
    const fromBottom = scroller.scrollHeight - scroller.scrollTop;
    try {
      await loadHistory(sessionId, true);
      if (frame) cancelAnimationFrame(frame);
      stuck = false;
      draw();
      scroller.scrollTop = scroller.scrollHeight - fromBottom;
    } catch (err) {
      toast(describe(err), 'error');
    }
    older.disabled = false;
  }

  let offered = [];
  let active = -1;
  let lineBreak = false; // the Enter being typed is a Shift+Enter
  let dismissed = null; // the text the list was closed on with Escape: not offered again until it changes

  function agentCommands() {
    const s = store.sessions.get(sessionId) || session;
    const inst = store.installations.get(s.installation_id);
    return inst && Array.isArray(inst.commands) ? inst.commands : [];
  }

  function drawCommands() {
    const query = commandQuery(input.value);
    offered = query === null || input.value === dismissed ? [] : filterCommands(agentCommands(), query);
    if (active >= offered.length) active = offered.length - 1;
    if (active < 0 && offered.length) active = 0;
    clear(commandList);
    commandList.hidden = offered.length === 0;
    offered.forEach((command, i) => {
      commandList.append(h('li', { id: `composer-command-${i}`, class: 'command', role: 'option', 'aria-selected': i === active ? 'true' : 'false',
        onpointerdown: (e) => e.preventDefault(),
        onclick: () => choose(i) },
        h('span', { class: 'command-name', text: `/${command.name}` }),
        command.description ? h('span', { class: 'command-description', text: command.description }) : null));
    });
    if (offered.length) {
      input.setAttribute('aria-activedescendant', `composer-command-${active}`);
      const current = commandList.children[active];
      if (current) current.scrollIntoView({ block: 'nearest' });
    } else {
      input.removeAttribute('aria-activedescendant');
    }
    // After "/name ", what the command expects.
    const chosen = commandIn(agentCommands(), input.value);
    const waiting = chosen && chosen.input_hint && input.value.trim() === `/${chosen.name}`;
    hint.hidden = !waiting;
    hint.textContent = waiting ? `/${chosen.name}: ${chosen.input_hint}` : '';
  }

  function choose(i) {
    const command = offered[i];
    if (!command) return;
    input.value = `/${command.name} `;
    offered = [];
    active = -1;
    drawCommands();
    resize();
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  function nearBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  }

  // Whether the reader follows the end of the chat; kept from their last scroll, since a picture that
  // finishes loading grows the list after the draw that added it.
  let stuck = true;
  scroller.addEventListener('scroll', () => {
    stuck = nearBottom();
    // Near the top, the page before comes by itself (the button stays for keyboards and screen readers).
    if (scroller.scrollTop < 80 && c.hasMore && !c.loading) loadOlder();
  }, { passive: true });
  list.addEventListener('load', () => { if (stuck) scroller.scrollTop = scroller.scrollHeight; }, true);

  function draw() {
    frame = 0;
    const stick = stuck || nearBottom();
    reconcile(list, timeline(sessionId), (item) => item.key,
      (item) => (item.type === 'message' ? messageEl() : item.type === 'task' ? taskCard.create(item.value) : approvalCard.create(item.value)),
      (el, item) => (item.type === 'message' ? updateMessage(el, item.value, item.settled, item.queued) : item.type === 'task' ? taskCard.update(el, item.value) : approvalCard.update(el, item.value)));
    older.hidden = !c.hasMore;
    meter.update(latestContext(c.messages.values()));
    drawEmpty();
    const open = inFlight(sessionId);
    const agentStreaming = [...c.messages.values()].find((m) => m.role === 'agent' && m.state === 'streaming');
    streaming = agentStreaming ? agentStreaming.interaction_id : open[open.length - 1] || null;
    cancel.hidden = !streaming;
    if (stick) scroller.scrollTop = scroller.scrollHeight;
    if (reveal) revealItem();
  }

  // The item the chat was opened at: once it is drawn, in view and highlighted for a moment; given
  // up once the history is read without it (older than its first page).
  let reveal = at;
  function revealItem() {
    const el = list.querySelector(`[data-key="${CSS.escape(reveal)}"]`)
      || (reveal.startsWith('c:') ? tray.el.querySelector(`[data-request="${CSS.escape(reveal.slice(2))}"]`) : null);
    if (!el) {
      if (c.loaded && !c.loading) reveal = null;
      return;
    }
    reveal = null;
    stuck = false;
    el.scrollIntoView({ block: 'center' });
    el.classList.add('revealed');
    setTimeout(() => el.classList.remove('revealed'), 4000);
  }

  function outboxItem() {
    return h('article', { class: 'msg msg-user msg-outbox', 'aria-label': 'Not sent yet' });
  }

  function updateOutboxItem(el, entry) {
    const reachable = relayReachable();
    const signature = `${entry.state}|${entry.error}|${reachable}`;
    if (el.dataset.signature === signature) return;
    el.dataset.signature = signature;
    el.className = `msg msg-user msg-outbox outbox-${entry.state}`;
    clear(el);
    el.append(h('div', { class: 'msg-body' }, h('p', { class: 'msg-plain', text: entry.text }),
      entry.attachments.length ? h('div', { class: 'attachments' }, entry.attachments.map((a) =>
        h('span', { class: 'attachment attachment-file' }, icon('file'), h('span', { text: a.name || a.key })))) : null));
    el.append(h('div', { class: 'msg-meta outbox-status', role: 'status' },
      h('span', { text: statusText(entry, reachable) }),
      entry.state === 'failed' ? h('button', { type: 'button', class: 'btn btn-small outbox-retry', text: 'Retry', onclick: () => retryMessage(entry.id) }) : null,
      entry.state !== 'sending' ? h('button', { type: 'button', class: 'btn btn-small btn-quiet outbox-discard', text: 'Discard',
        'aria-label': 'Discard this message', onclick: () => discardMessage(entry.id) }) : null));
  }

  // What a new chat shows: what to type, who answers, and "/" when the agent has commands.
  function drawEmpty() {
    const empty = c.loaded && list.children.length === 0 && outboxOf(sessionId).length === 0;
    emptyState.hidden = !empty;
    if (!empty) return;
    const s = store.sessions.get(sessionId) || session;
    const inst = store.installations.get(s.installation_id);
    const machine = installationName(inst);
    // The chat's own agent when the machine runs several (issue 36), else the one its manifest names.
    const agent = (typeof s.agent === 'string' && s.agent && agentLabel(s.agent)) || (inst && inst.agent && agentLabel(inst.agent.name)) || 'The agent';
    const commands = agentCommands();
    const refused = refusalOf(s.agent_state);
    const signature = JSON.stringify([machine, agent, commands.length, inst && inst.health, !!(refused && refused.refused)]);
    if (emptyState.dataset.signature === signature) return;
    emptyState.dataset.signature = signature;
    clear(emptyState);
    // A chat the machine refused to start: what to do instead, not what to type (the bar says why).
    if (refused && refused.refused) {
      append(emptyState, [
        h('h2', { class: 'chat-empty-title', text: 'This chat did not start' }),
        h('p', { text: `${machine} refused to start ${agent} here, for the reason above, and runs nothing for this chat.` }),
        h('p', null, h('a', { class: 'btn btn-primary', href: `#/new/${encodeURIComponent(s.installation_id)}`, text: 'Start a new chat' }))]);
      return;
    }
    append(emptyState, [
      h('h2', { class: 'chat-empty-title', text: 'Start the conversation' }),
      h('p', { text: `Type a message below: ask a question, or ask for something to be done. ${agent} on ${machine} will answer here.` }),
      // Not "anything it runs asks first": what asks is the agent's own setting on the machine, and reading files seldom does.
      h('p', { text: 'Before it changes a file or runs a command, it asks you here, as its settings on the machine say. Reading files usually does not ask.' }),
      commands.length ? h('p', null, 'Type ', h('kbd', { text: '/' }), ` to see its ${commands.length === 1 ? 'command' : `${commands.length} commands`}.`) : null,
      inst && inst.health !== 'healthy' && inst.state !== 'revoked'
        ? h('p', { class: 'chat-empty-note', text: `${machine} is not answering right now: what you write waits until it is back.` }) : null]);
  }

  function drawOutbox() {
    const stick = stuck || nearBottom();
    reconcile(outboxList, outboxOf(sessionId), (e) => e.id, outboxItem, updateOutboxItem);
    drawEmpty();
    if (stick) scroller.scrollTop = scroller.scrollHeight;
  }

  // Deltas arrive faster than a screen refreshes: one draw per frame.
  function schedule() {
    if (!frame) frame = requestAnimationFrame(draw);
  }

  // In an encrypted session the bytes leave this device sealed, and the name and type with the message (meta_ct).
  async function upload(file) {
    if (file.size > ATTACHMENT_BYTES_MAX) throw new Error(`${file.name} is larger than 25 MB`);
    const sealed = await uploadBody(store.sessions.get(sessionId), file);
    const query = sealed.name ? `?name=${encodeURIComponent(sealed.name)}` : '';
    const result = await api('POST', `/v1/me/attachments${query}`, { raw: sealed.raw, contentType: sealed.contentType });
    return sealed.meta ? { ...result, ...sealed.meta, meta_ct: sealed.meta_ct } : result;
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
    // Sending ends dictation: what the composer shows is what goes, and no late word refills it.
    if (dictate) dictate.stop();
    const text = input.value.trim();
    if (!text && pending.length === 0) return;
    send.disabled = true;
    try {
      await Promise.all(pending.map((entry) => entry.promise));
      if (!text && !pending.some((e) => e.state === 'ready')) return;
      // Through the outbox (outbox.js): sent now if the relay can be reached, kept until it can otherwise.
      queueMessage(sessionId, text, pending.filter((e) => e.state === 'ready').map((e) => ({
        key: e.result.key, name: e.result.name || e.file.name || '', mime: e.result.mime || e.file.type || '', size: e.result.size || e.file.size || 0,
        ...(e.result.meta_ct ? { meta_ct: e.result.meta_ct } : {}) })));
      input.value = '';
      drawCommands();
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
      await patch(`/v1/me/sessions/${encodeURIComponent(sessionId)}`, await titleBody(s, value.trim() || null));
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

  input.addEventListener('input', () => {
    resize();
    if (dismissed !== null && input.value !== dismissed) dismissed = null;
    // What was typed changed the list: its first entry is the one Enter takes.
    active = 0;
    drawCommands();
  });
  input.addEventListener('keydown', (e) => {
    if (offered.length && !e.isComposing) {
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        active = (active + (e.key === 'ArrowDown' ? 1 : -1) + offered.length) % offered.length;
        drawCommands();
        return;
      }
      if (e.key === 'Enter' || e.key === 'Tab') {
        e.preventDefault();
        choose(Math.max(0, active));
        return;
      }
      if (e.key === 'Escape') {
        e.preventDefault();
        dismissed = input.value;
        drawCommands();
        return;
      }
    }
    // Enter sends (a desktop's Enter, a phone's Send key: enterkeyhint="send"); Shift+Enter breaks the line.
    lineBreak = e.key === 'Enter' && e.shiftKey;
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
  });
  // A phone keyboard that sends no usable keydown (Android's IME reports key 229) still asks for a line
  // break through beforeinput: on a touch screen that is its Send key, unless Shift was down.
  input.addEventListener('beforeinput', (e) => {
    const breaking = e.inputType === 'insertLineBreak' || e.inputType === 'insertParagraph';
    if (breaking && !lineBreak && !offered.length && window.matchMedia('(pointer: coarse)').matches) {
      e.preventDefault();
      submit();
    }
    lineBreak = false;
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
    if (endsTurn(m) && m.finalized_at && Date.now() - m.finalized_at < 5000) announce('Reply finished');
  }));
  subscriptions.push(onKeys((id) => {
    if (id === null || id === sessionId) header();
  }));
  subscriptions.push(on('sessions', () => {
    if (!store.sessions.has(sessionId)) {
      if (store.deleted.has(sessionId)) go('/');
      return;
    }
    header();
    drawEmpty();
  }));
  subscriptions.push(on('installations', () => {
    header();
    drawEmpty();
    if (commandQuery(input.value) !== null || !hint.hidden) drawCommands();
  }));
  subscriptions.push(on('outbox', drawOutbox));
  subscriptions.push(on('connection', () => {
    header();
    drawOutbox();
  }));
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
  drawOutbox();
  if (!at) scroller.scrollTop = scroller.scrollHeight;
  for (const a of store.approvals.values()) if (a.session_id === sessionId) autoApprove(a);
  if (window.matchMedia('(pointer: fine)').matches) input.focus({ preventScroll: true });

  return () => {
    for (const unsubscribe of subscriptions) unsubscribe();
    clearInterval(ticker);
    tray.dispose();
    filesLink.dispose();
    bar.dispose();
    if (dictate) dictate.dispose();
    document.removeEventListener('click', closeMenu);
    if (frame) cancelAnimationFrame(frame);
    document.title = 'Relay';
  };
}
