// What a session changed (docs/web.md "Files"): every file the agent touched,
// each with the session's combined diff (touched.js) and its current content
// read from the machine through the relay, which asks the bridge
// (file.read.req; docs/api.md "Files the agent touched"). In an encrypted
// session the bridge's reports and its answer are sealed under
// agent_files/<sid>/<blind index>, opened here, and a file is asked for by
// blind index (GET /v1/me/sessions/:id/files/:idx); in a plain one they come
// in clear and a file is asked for by its path (POST .../files/read {path}).
//
// Reached from the chat header's Files button (filesButton), as #/files/<sid>.
import { h, clear, icon, formatSize, toast } from './ui.js';
import { get, post, describe } from './api.js';
import { store, on, chat, loadHistory } from './state.js';
import { keysOf, onKeys, hasKey } from './e2e.js';
import { openText, openBytes, fromBase64 } from './crypto.js';
import { diffView } from './blocks.js';
import { touchedFiles, readContent } from './touched.js';

// Text shown at once; the rest behind a button (a phone must not lay out 1.5 MB of text unasked).
const EAGER_CHARS = 64 * 1024;
// How far back the view reads the chat's timeline for its tool calls.
const MAX_PAGES = 40;
// The most relay-bridge sends of one file (docs/bridge.md "Encryption"): past it, the start, marked truncated.
const BRIDGE_CAP = 1536 * 1024;

const filePath = (sid, idx) => `agent_files/${sid}/${idx}`;
const enc = encodeURIComponent;

// The bridge's reports of a session ({path, name, tool, size_bytes, path_blind_idx?, updated_at}): opened in an
// encrypted session (a report no key opens is left out), as they are in a plain one (no path_blind_idx).
const reports = new Map(); // session id -> the opened list, for the header's count

async function openReport(sessionId, f) {
  const keys = keysOf(sessionId);
  if (!f || !f.path_blind_idx || !keys.length) return null;
  const path = await openText(keys, filePath(sessionId, f.path_blind_idx), f.path_ct).catch(() => null);
  if (path === null) return null;
  const name = await openText(keys, filePath(sessionId, f.path_blind_idx), f.display_name_ct).catch(() => null);
  return { path, name: name || '', tool: f.tool, size_bytes: f.size_bytes, mime: f.mime, path_blind_idx: f.path_blind_idx, updated_at: f.updated_at };
}

function plainReport(f) {
  if (!f || typeof f.path !== 'string' || !f.path) return null;
  return { path: f.path, name: typeof f.display_name === 'string' ? f.display_name : '', tool: f.tool, size_bytes: f.size_bytes, mime: f.mime, updated_at: f.updated_at };
}

async function loadReports(sessionId) {
  const s = store.sessions.get(sessionId);
  if (!s) return [];
  const { files } = await get(`/v1/me/sessions/${enc(sessionId)}/files`);
  const opened = (await Promise.all((files || []).map((f) => (s.encrypted ? openReport(sessionId, f) : plainReport(f))))).filter(Boolean);
  reports.set(sessionId, opened);
  return opened;
}

function filesOf(sessionId, combine = true) {
  return touchedFiles(chat(sessionId).tasks.values(), reports.get(sessionId) || [], { combine });
}

// The chat header's button: "Files" with how many the session touched. Returns {el, dispose}.
export function filesButton(sessionId) {
  const count = h('span', { class: 'files-count' });
  const el = h('a', { class: 'files-button', href: `#/files/${enc(sessionId)}` }, icon('file'), count);
  const draw = () => {
    // Drawn again with every streamed delta: counted without chaining the edits.
    const n = filesOf(sessionId, false).length;
    // No number before there is one to give: an empty chat's header stays quiet.
    count.textContent = n ? String(n) : '';
    el.setAttribute('aria-label', `Files the agent touched: ${n}`);
  };
  const refresh = () => loadReports(sessionId).then(draw, () => {});
  const offs = [
    on(`messages:${sessionId}`, draw),
    on('event:session_file_touched', (d) => { if (d && d.session_id === sessionId) refresh(); }),
    onKeys((id) => { if (id === null || id === sessionId) refresh(); }),
  ];
  draw();
  refresh();
  return { el, dispose: () => offs.forEach((off) => off()) };
}

const TOOL_WORDS = { write: 'Written', edit: 'Edited', read: 'Read', other: 'Named' };

// What the bridge said, in words (src/bridge/bridge.c read_agent_file; the authors' bridge's codes too).
const BRIDGE_WORDS = {
  forbidden: 'The machine refused to read it: the file is outside the folder the agent works in, or no longer the file the agent touched.',
  not_found: 'The file is no longer on the machine.',
  too_large: 'The file is too large for the machine to send.',
  no_session_key: 'The machine does not hold this chat’s key, so it cannot seal the file for you.',
  crypto_failed: 'The machine could not open the file’s sealed path.',
  read_failed: 'The machine could not read the file.',
  permission_denied: 'The machine may not read this file.',
  session_not_plain: 'The machine has not heard of this chat since it started: send the agent a message, then try again.',
};

function refusal(err) {
  if (err.status === 502 && err.details && err.details.bridge_error) {
    const code = String(err.details.bridge_error.code || 'unknown');
    return { code, text: BRIDGE_WORDS[code] || `The machine could not answer (${code}).` };
  }
  const words = {
    bridge_offline: 'The machine is offline: its content can be read when it is connected again.',
    bridge_timeout: 'The machine did not answer in time.',
    bridge_busy: 'The machine is busy with other requests: try again in a moment.',
  };
  return { code: err.code, text: words[err.code] || describe(err) };
}

// The content the machine sent, drawn into box: text (a long one in steps), binary, or the start of a large file.
function drawContent(box, file, bytes, answer) {
  clear(box);
  const size = typeof answer.size_bytes === 'number' ? answer.size_bytes : bytes.length;
  const truncated = answer.truncated === true || size > bytes.length;
  const content = readContent(bytes, truncated);
  if (content.kind === 'binary') {
    box.append(h('p', { class: 'file-note', role: 'note', text: `A binary file of ${formatSize(size)}: not shown as text.` }));
    return;
  }
  const pre = h('pre', { class: 'code-block file-text', tabindex: '0', 'aria-label': `Content of ${file.name}` });
  const showText = (limit) => {
    clear(pre);
    pre.append(h('code', { text: content.text.slice(0, limit) }));
  };
  const more = () => h('button', { type: 'button', class: 'btn btn-small', text: 'Show all of it',
    onclick: (e) => { showText(Infinity); e.target.remove(); } });
  if (truncated) {
    const start = h('button', { type: 'button', class: 'btn btn-small file-show-start',
      text: `Show the first ${formatSize(bytes.length)}`,
      onclick: (e) => {
        e.target.replaceWith(pre);
        showText(EAGER_CHARS);
        if (content.text.length > EAGER_CHARS) pre.after(more());
      } });
    box.append(h('p', { class: 'file-note', role: 'note',
      text: `This file is ${formatSize(size)}; the machine sends only its first ${formatSize(bytes.length)}.` }), start);
    return;
  }
  box.append(h('p', { class: 'file-meta', text: formatSize(size) }), pre);
  showText(EAGER_CHARS);
  if (content.text.length > EAGER_CHARS) box.append(more());
}

// Asks the machine for the file's content now.
async function readCurrent(sessionId, file, box) {
  clear(box);
  box.append(h('p', { class: 'file-note', role: 'status', text: 'Reading from the machine…' }));
  try {
    const sealed = Boolean(file.agent.path_blind_idx);
    // A plain chat's file by its path; an encrypted one's only by blind index, its path never in clear.
    const answer = sealed ? await get(`/v1/me/sessions/${enc(sessionId)}/files/${enc(file.agent.path_blind_idx)}`)
      : await post(`/v1/me/sessions/${enc(sessionId)}/files/read`, { path: file.agent.path });
    let bytes = fromBase64(answer.base64 || '');
    if (answer.encrypted) {
      if (!sealed) throw Object.assign(new Error('sealed answer in a plain chat'), { sealedFailed: true });
      bytes = await openBytes(keysOf(sessionId), filePath(sessionId, file.agent.path_blind_idx), bytes);
      if (!bytes) throw Object.assign(new Error('no key'), { sealedFailed: true });
    }
    drawContent(box, file, bytes, answer);
  } catch (err) {
    clear(box);
    if (err.sealedFailed) {
      box.append(h('p', { class: 'file-refused', role: 'alert', text: 'The answer did not open with this chat’s key.' }));
      return;
    }
    const { code, text } = refusal(err);
    const size = code === 'too_large' && err.details && err.details.bridge_error.size_bytes;
    box.append(h('p', { class: 'file-refused', role: 'alert', dataset: { code } },
      text, size ? ` (${formatSize(size)}; it sends files up to ${formatSize(BRIDGE_CAP)})` : null));
    box.append(h('button', { type: 'button', class: 'btn btn-small', text: 'Try again', onclick: () => readCurrent(sessionId, file, box) }));
  }
}

function currentSection(sessionId, file) {
  const box = h('div', { class: 'file-current-body' });
  if (!file.agent) {
    box.append(h('p', { class: 'file-note',
      text: 'The machine did not report this file (the agent did not read or write it through relay-bridge), so it cannot be read from here.' }));
  } else {
    const size = typeof file.agent.size_bytes === 'number' ? ` (${formatSize(file.agent.size_bytes)} when the agent touched it)` : '';
    box.append(h('button', { type: 'button', class: 'btn btn-small file-read', text: 'Read it from the machine',
      onclick: () => readCurrent(sessionId, file, box) }), h('span', { class: 'file-meta file-size', text: size }));
  }
  return h('section', { class: 'file-current', 'aria-label': 'Current content' }, h('h3', { text: 'Now on the machine' }), box);
}

function changesSection(file) {
  const out = h('section', { class: 'file-changes', 'aria-label': 'Changes in this chat' }, h('h3', { text: 'Changes in this chat' }));
  if (!file.parts.length) {
    out.append(h('p', { class: 'file-note', text: file.notApplied ? 'Its edits were not applied (denied or failed).' : 'No edit of this file in the chat.' }));
    return out;
  }
  const edits = file.edits.length;
  const notes = [edits === 1 ? 'One edit.' : `${edits} edits, combined.`];
  if (file.parts.length > 1) notes.push(`They do not follow one another (the file changed in between, or an edit named text not found): shown as ${file.parts.length} parts.`);
  if (file.pending) notes.push('An edit is still running.');
  if (file.notApplied) notes.push(`${file.notApplied === 1 ? 'One edit was' : `${file.notApplied} edits were`} not applied (denied or failed) and is left out.`);
  out.append(h('p', { class: 'file-note', text: notes.join(' ') }));
  for (const part of file.parts) out.append(diffView({ type: 'diff', path: file.path, old_text: part.old_text, new_text: part.new_text }));
  return out;
}

function fileCard(sessionId, file) {
  const cut = file.path.lastIndexOf('/');
  const dir = cut > 0 ? file.path.slice(0, cut + 1) : '';
  const tools = file.tools.map((t) => h('span', { class: `pill file-tool file-tool-${t}`, text: TOOL_WORDS[t] || t }));
  const card = h('details', { class: 'file-card', dataset: { path: file.path } },
    h('summary', { class: 'file-summary' },
      h('span', { class: 'file-icon', 'aria-hidden': 'true' }, icon('file')),
      h('span', { class: 'file-names' }, h('strong', { class: 'file-name', text: file.name }), dir ? h('span', { class: 'file-dir', text: dir }) : null),
      h('span', { class: 'file-tools' }, tools)));
  // Drawn when opened: a long list of files with large diffs stays light until the user asks.
  card.addEventListener('toggle', () => {
    if (!card.open || card.dataset.drawn) return;
    card.dataset.drawn = '1';
    card.append(h('div', { class: 'file-body' }, changesSection(file), currentSection(sessionId, file)));
  });
  return card;
}

export function filesView(main, sessionId) {
  const session = store.sessions.get(sessionId);
  if (!session) {
    main.append(h('div', { class: 'screen' }, h('h1', { text: 'Chat not found' }),
      h('a', { class: 'btn', href: '#/', text: 'Back to chats' })));
    return null;
  }
  const list = h('div', { class: 'files-list', 'aria-live': 'polite' });
  const status = h('p', { class: 'file-note', role: 'status', text: 'Reading the chat…' });
  main.append(h('div', { class: 'files-screen' },
    h('header', { class: 'chat-header' },
      h('a', { class: 'icon-btn back files-back', href: `#/s/${enc(sessionId)}`, 'aria-label': 'Back to the chat' }, icon('back')),
      h('div', { class: 'chat-heading' }, h('h1', { class: 'chat-title', text: 'Files' }),
        h('div', { class: 'chat-subtitle', text: session.title || 'Untitled chat' }))),
    h('div', { class: 'screen files' }, status, list)));

  let disposed = false;
  let drawn = null;
  const draw = () => {
    if (disposed) return;
    // Redrawn only when the list changes (a streamed delta changes nothing here): an opened card keeps what the user read.
    const locked = session.encrypted && !hasKey(sessionId);
    const signature = JSON.stringify([locked, filesOf(sessionId, false).map((f) =>
      [f.path, f.tools, f.edits.length, f.notApplied, f.pending, f.agent && (f.agent.path_blind_idx || f.agent.path)])]);
    if (signature === drawn) return;
    drawn = signature;
    const files = filesOf(sessionId);
    const open = new Set([...list.querySelectorAll('.file-card[open]')].map((c) => c.dataset.path));
    clear(list);
    status.textContent = locked ? 'Waiting for this device to receive the chat’s key: the files are listed once it can read them.'
      : files.length ? `${files.length === 1 ? 'One file' : `${files.length} files`} the agent touched in this chat.`
        : 'The agent has not touched a file in this chat yet.';
    for (const file of files) {
      const card = fileCard(sessionId, file);
      list.append(card);
      if (open.has(file.path)) card.open = true;
    }
  };

  (async () => {
    try {
      // Every tool call of the chat, not only the pages the chat showed.
      const c = chat(sessionId);
      if (!c.loaded) await loadHistory(sessionId);
      for (let i = 0; i < MAX_PAGES && c.hasMore; i++) await loadHistory(sessionId, true);
      await loadReports(sessionId);
    } catch (err) {
      toast(describe(err), 'error');
    }
    draw();
  })();

  const offs = [
    on(`messages:${sessionId}`, () => { if (drawn !== null) draw(); }),
    on('event:session_file_touched', (d) => { if (d && d.session_id === sessionId) loadReports(sessionId).then(draw, () => {}); }),
    // The key arrived: the tool calls are read again (state.js) and the reports open now.
    onKeys((id) => { if ((id === null || id === sessionId) && drawn !== null) loadReports(sessionId).then(draw, () => {}); }),
  ];
  return () => {
    disposed = true;
    offs.forEach((off) => off());
  };
}
