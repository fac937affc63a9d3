// A line diff for the diff view (no DOM: unit-tested under Node's test
// runner, tests/browser/unit/diff.test.js).
//
// diffLines(oldText, newText) compares by lines with Myers' O(ND) algorithm
// after trimming the common start and end. A phone must never freeze on an
// agent's 256 KiB file: past MAX_LINES lines or MAX_EDITS changed lines the
// diff gives up and answers "replace whole" (every old line removed, every
// new line added) with exact: false, which the view says.
//
// hunks(ops, context) groups the result for display: changed lines with
// `context` unchanged lines around them, and the unchanged runs between as
// folds ("N unchanged lines") that keep their lines so the view can expand
// them.

export const MAX_LINES = 50000;
export const MAX_EDITS = 1000;
export const CONTEXT = 3;

// A text's lines: "\n" or "\r\n" ends a line; a final line ending adds no empty line.
export function splitLines(text) {
  if (text === null || text === undefined || text === '') return [];
  const lines = String(text).split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

// Lines to small integers, so the inner loop compares numbers rather than strings.
function intern(oldLines, newLines) {
  const ids = new Map();
  const map = (line) => {
    let id = ids.get(line);
    if (id === undefined) {
      id = ids.size;
      ids.set(line, id);
    }
    return id;
  };
  return [Int32Array.from(oldLines, map), Int32Array.from(newLines, map)];
}

// Myers' greedy forward search, keeping each round's frontier to walk back the
// path. Returns the edit script over a[0..n) and b[0..m) as a list of
// [type, aIndex, bIndex] with type 0 same, -1 removed, 1 added; null when the
// edit distance passes maxEdits.
function myers(a, b, maxEdits) {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  let v = new Int32Array(2 * max + 3);
  const trace = [];
  let found = -1;
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  if (found < 0) return null;
  // Walk back from (n, m) through the saved frontiers.
  const script = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const saved = trace[d]; // frontier before round d, indexed k + d + 1
    const at = (k) => saved[k + d + 1];
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      script.push([0, x, y]);
    }
    if (down) {
      y--;
      script.push([1, x, y]);
    } else {
      x--;
      script.push([-1, x, y]);
    }
  }
  while (x > 0 && y > 0) {
    x--;
    y--;
    script.push([0, x, y]);
  }
  script.reverse();
  return script;
}

// The diff of two texts as display lines:
//   { type: 'same' | 'del' | 'add', old: line number or null, new: line number or null, text }
// and whether it is a true line diff (exact) or the "replace whole" fallback.
export function diffLines(oldText, newText, { maxLines = MAX_LINES, maxEdits = MAX_EDITS } = {}) {
  const oldLines = splitLines(oldText);
  const newLines = splitLines(newText);
  const ops = [];
  let start = 0;
  while (start < oldLines.length && start < newLines.length && oldLines[start] === newLines[start]) start++;
  let endOld = oldLines.length;
  let endNew = newLines.length;
  while (endOld > start && endNew > start && oldLines[endOld - 1] === newLines[endNew - 1]) {
    endOld--;
    endNew--;
  }
  for (let i = 0; i < start; i++) ops.push({ type: 'same', old: i + 1, new: i + 1, text: oldLines[i] });
  const midOld = oldLines.slice(start, endOld);
  const midNew = newLines.slice(start, endNew);
  let exact = true;
  let script = null;
  if (midOld.length === 0 || midNew.length === 0) {
    script = [];
    for (let i = 0; i < midOld.length; i++) script.push([-1, i, 0]);
    for (let j = 0; j < midNew.length; j++) script.push([1, 0, j]);
  } else if (midOld.length + midNew.length <= maxLines) {
    const [a, b] = intern(midOld, midNew);
    script = myers(a, b, maxEdits);
  }
  if (!script) {
    exact = false;
    script = [];
    for (let i = 0; i < midOld.length; i++) script.push([-1, i, 0]);
    for (let j = 0; j < midNew.length; j++) script.push([1, 0, j]);
  }
  for (const [type, i, j] of script) {
    if (type === 0) ops.push({ type: 'same', old: start + i + 1, new: start + j + 1, text: midOld[i] });
    else if (type < 0) ops.push({ type: 'del', old: start + i + 1, new: null, text: midOld[i] });
    else ops.push({ type: 'add', old: null, new: start + j + 1, text: midNew[j] });
  }
  const shift = endNew - endOld;
  for (let i = endOld; i < oldLines.length; i++) ops.push({ type: 'same', old: i + 1, new: i + 1 + shift, text: oldLines[i] });
  return { ops, exact };
}

// Counts of added and removed lines.
export function stats(ops) {
  let added = 0;
  let removed = 0;
  for (const op of ops) {
    if (op.type === 'add') added++;
    else if (op.type === 'del') removed++;
  }
  return { added, removed };
}

// Display parts: { type: 'lines', lines } and { type: 'fold', lines } (unchanged
// lines hidden until asked for). A fold of fewer than three lines is not worth a
// click: those stay shown.
export function hunks(ops, context = CONTEXT) {
  const keep = new Uint8Array(ops.length);
  let changed = false;
  for (let i = 0; i < ops.length; i++) {
    if (ops[i].type === 'same') continue;
    changed = true;
    for (let j = Math.max(0, i - context); j <= Math.min(ops.length - 1, i + context); j++) keep[j] = 1;
  }
  if (!changed) return ops.length ? [{ type: 'fold', lines: ops.slice() }] : [];
  const parts = [];
  let i = 0;
  while (i < ops.length) {
    let j = i;
    while (j < ops.length && keep[j] === keep[i]) j++;
    const lines = ops.slice(i, j);
    const fold = !keep[i] && lines.length >= 3;
    const last = parts[parts.length - 1];
    if (!fold && last && last.type === 'lines') last.lines.push(...lines);
    else parts.push({ type: fold ? 'fold' : 'lines', lines });
    i = j;
  }
  return parts;
}
