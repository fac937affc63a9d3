// The files an agent touched in a session, and what the session did to each
// (no DOM, no network: tests/browser/unit/touched.test.js). files.js shows it.
//
// Two sources: the tool calls of the chat (their diff blocks and locations,
// docs/api.md "Content blocks") and, in an encrypted session, the bridge's
// reports (notifyToolFile, opened: {path, name, tool, size_bytes,
// path_blind_idx}). A file is keyed by its path as written.
//
// The combined diff of a file: its edits in the order they happened, chained.
// An edit whose old text is the text the previous one left continues it; an
// edit whose old text is a snippet found once in that text (an Edit tool's
// replace) is applied inside it; anything else (the file changed outside what
// the session saw, or a snippet that is not there) starts a new part. So
// one part means "from the first old text to the last new text", and the
// view says when there are more.
import { contentBlocks, itemAt, FINAL_TASK } from './transcript.js';

// Tasks that did not change anything: a failed or cancelled edit (a denied approval) is not applied.
const NOT_APPLIED = new Set(['failed', 'cancelled']);

const isText = (v) => typeof v === 'string';

export function baseName(path) {
  const cut = path.lastIndexOf('/');
  return cut >= 0 && cut < path.length - 1 ? path.slice(cut + 1) : path;
}

// Chains edits [{old_text (null: created), new_text}] into parts [{old_text, new_text, edits}].
export function combineEdits(edits) {
  const parts = [];
  let part = null;
  for (const edit of edits) {
    const oldText = isText(edit.old_text) ? edit.old_text : null;
    const newText = isText(edit.new_text) ? edit.new_text : '';
    if (part && oldText !== null && oldText === part.new_text) {
      part.new_text = newText;
      part.edits++;
      continue;
    }
    if (part && oldText !== null && oldText !== '' && occursOnce(part.new_text, oldText)) {
      part.new_text = part.new_text.replace(oldText, () => newText);
      part.edits++;
      continue;
    }
    // A file written whole (no old text) after earlier edits replaces what they left.
    if (part && oldText === null) {
      part.new_text = newText;
      part.edits++;
      continue;
    }
    part = { old_text: oldText, new_text: newText, edits: 1 };
    parts.push(part);
  }
  return parts;
}

function occursOnce(text, snippet) {
  const first = text.indexOf(snippet);
  return first >= 0 && text.indexOf(snippet, first + 1) < 0;
}

// Tasks in the order they happened (chat.js orders the timeline the same way).
function inOrder(tasks) {
  return [...tasks].sort((x, y) => itemAt(x) - itemAt(y) || (x.tie || 0) - (y.tie || 0) ||
    (x.task_id < y.task_id ? -1 : x.task_id > y.task_id ? 1 : 0));
}

function entry(files, path) {
  let f = files.get(path);
  if (!f) {
    f = { path, name: baseName(path), tools: new Set(), edits: [], notApplied: 0, pending: 0, at: 0, agent: null };
    files.set(path, f);
  }
  return f;
}

// The locations of a tool call's result (else its latest partial result).
function locations(task) {
  for (const r of [task.result, task.partial_result]) {
    if (r && typeof r === 'object' && Array.isArray(r.locations))
      return r.locations.filter((l) => l && isText(l.path) && l.path !== '').map((l) => l.path);
  }
  return [];
}

// Every file of the session: [{path, name, tools: [...], edits, parts, notApplied, pending, agent, at}],
// the most recently touched first. `tasks`: the chat's tasks; `reports`: the bridge's, opened.
// With combine false, parts is null: a count or a comparison needs no chaining of large texts.
export function touchedFiles(tasks, reports = [], { combine = true } = {}) {
  const files = new Map();
  for (const task of inOrder(tasks)) {
    if (!task || task.kind === 'plan' || task.kind === 'think') continue;
    const at = itemAt(task);
    const diffs = contentBlocks(task).filter((b) => b.type === 'diff' && isText(b.path) && b.path !== '');
    for (const block of diffs) {
      const f = entry(files, block.path);
      f.at = Math.max(f.at, at);
      f.tools.add(block.old_text === null || block.old_text === undefined ? 'write' : 'edit');
      if (NOT_APPLIED.has(task.status)) f.notApplied++;
      else {
        if (!FINAL_TASK.has(task.status)) f.pending++;
        f.edits.push({ task_id: task.task_id, old_text: block.old_text, new_text: block.new_text });
      }
    }
    const diffPaths = new Set(diffs.map((b) => b.path));
    for (const path of locations(task)) {
      if (diffPaths.has(path)) continue;
      const f = entry(files, path);
      f.at = Math.max(f.at, at);
      f.tools.add(task.kind === 'read' ? 'read' : task.kind === 'edit' ? 'edit' : 'other');
    }
  }
  for (const report of reports) {
    if (!report || !isText(report.path) || report.path === '') continue;
    const f = entry(files, report.path);
    f.agent = report;
    if (isText(report.name) && report.name) f.name = report.name;
    if (isText(report.tool)) f.tools.add(report.tool);
    f.at = Math.max(f.at, report.updated_at || 0);
  }
  const list = [...files.values()].map((f) => ({ ...f, tools: [...f.tools].filter((t) => t !== 'other' || f.tools.size === 1), parts: combine ? combineEdits(f.edits) : null }));
  return list.sort((x, y) => y.at - x.at || (x.path < y.path ? -1 : 1));
}

// What the bytes the bridge sent are, for the view: {kind: 'text', text} or {kind: 'binary'}.
// Binary: a NUL byte in the first 8 KiB, or bytes that are not UTF-8 (a cut at the very end of a
// truncated answer is not counted: the last character may be split).
export function readContent(bytes, truncated = false) {
  const head = bytes.subarray(0, 8192);
  if (head.includes(0)) return { kind: 'binary' };
  let body = bytes;
  if (truncated) {
    // Up to three bytes of a character cut in two are left out.
    let end = bytes.length;
    for (let i = 1; i <= 3 && end - i >= 0; i++) {
      const b = bytes[end - i];
      if ((b & 0xc0) === 0xc0) {
        const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
        if (i < need) end -= i;
        break;
      }
      if ((b & 0x80) === 0) break;
    }
    body = bytes.subarray(0, end);
  }
  try {
    return { kind: 'text', text: new TextDecoder('utf-8', { fatal: true }).decode(body) };
  } catch (err) {
    return { kind: 'binary' };
  }
}
