// The files of a session and their combined diffs (web/app/touched.js), under Node's test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { combineEdits, touchedFiles, readContent, baseName } from '../../../web/app/touched.js';

const diff = (path, oldText, newText) => ({ content: [{ type: 'diff', path, old_text: oldText, new_text: newText }] });
const task = (id, at, kind, status, result) => ({ task_id: id, created_at: at, kind, status, result });

test('whole-file edits chain: one part from the first old text to the last new text', () => {
  const parts = combineEdits([
    { old_text: null, new_text: 'a\n' },
    { old_text: 'a\n', new_text: 'a\nb\n' },
    { old_text: 'a\nb\n', new_text: 'A\nb\n' },
  ]);
  assert.deepEqual(parts, [{ old_text: null, new_text: 'A\nb\n', edits: 3 }]);
});

test('a snippet found once is applied inside the text; one found twice or not at all starts a new part', () => {
  const once = combineEdits([
    { old_text: 'x = 1\ny = 2\nz = 3\n', new_text: 'x = 1\ny = 20\nz = 3\n' },
    { old_text: 'z = 3', new_text: 'z = 30' },
  ]);
  assert.deepEqual(once, [{ old_text: 'x = 1\ny = 2\nz = 3\n', new_text: 'x = 1\ny = 20\nz = 30\n', edits: 2 }]);
  // "$&" in the new text is text, not a replacement pattern.
  assert.equal(combineEdits([{ old_text: 'ab', new_text: 'ab' }, { old_text: 'b', new_text: '$&$&' }])[0].new_text, 'a$&$&');
  const twice = combineEdits([{ old_text: 'k', new_text: 'v v' }, { old_text: 'v', new_text: 'w' }]);
  assert.equal(twice.length, 2, 'an ambiguous snippet cannot be placed');
  const elsewhere = combineEdits([{ old_text: 'one', new_text: 'two' }, { old_text: 'three', new_text: 'four' }]);
  assert.deepEqual(elsewhere, [{ old_text: 'one', new_text: 'two', edits: 1 }, { old_text: 'three', new_text: 'four', edits: 1 }]);
  assert.equal(combineEdits([{ old_text: 'a', new_text: 'b' }, { old_text: '', new_text: 'c' }]).length, 2, 'an empty snippet is nowhere');
});

test('a file written whole after edits replaces what they left, and stays one part', () => {
  const parts = combineEdits([{ old_text: 'a', new_text: 'b' }, { old_text: null, new_text: 'c' }]);
  assert.deepEqual(parts, [{ old_text: 'a', new_text: 'c', edits: 2 }]);
  assert.deepEqual(combineEdits([]), []);
});

test('files from the tool calls: in the order the edits happened, whatever order the tasks come in', () => {
  const tasks = [
    task('t3', 30, 'edit', 'completed', diff('/p/a.md', 'one\ntwo\n', 'one\ntwo\nthree\n')),
    task('t1', 10, 'edit', 'completed', diff('/p/a.md', null, 'one\n')),
    task('t2', 20, 'edit', 'completed', diff('/p/a.md', 'one\n', 'one\ntwo\n')),
    task('t4', 40, 'edit', 'completed', diff('/p/b.txt', null, 'bee\n')),
    task('t5', 50, 'read', 'completed', { content: [], locations: [{ path: '/p/c.json', line: 3 }] }),
    task('t6', 60, 'plan', 'completed', { entries: [] }),
  ];
  const files = touchedFiles(tasks);
  assert.deepEqual(files.map((f) => f.path), ['/p/c.json', '/p/b.txt', '/p/a.md'], 'most recently touched first');
  const a = files.find((f) => f.name === 'a.md');
  assert.deepEqual(a.edits.map((e) => e.task_id), ['t1', 't2', 't3']);
  assert.deepEqual(a.parts, [{ old_text: null, new_text: 'one\ntwo\nthree\n', edits: 3 }]);
  assert.deepEqual(a.tools.sort(), ['edit', 'write']);
  assert.deepEqual(files[0].tools, ['read']);
  assert.deepEqual(files[0].parts, []);
  // Counted without chaining: the same files, no parts.
  const counted = touchedFiles(tasks, [], { combine: false });
  assert.deepEqual(counted.map((f) => f.path), files.map((f) => f.path));
  assert.ok(counted.every((f) => f.parts === null));
});

test('a denied or failed edit is counted but not applied; a running one is applied and counted as pending', () => {
  const files = touchedFiles([
    task('t1', 10, 'edit', 'completed', diff('/p/a', null, 'a\n')),
    task('t2', 20, 'edit', 'failed', diff('/p/a', 'a\n', 'evil\n')),
    { task_id: 't3', created_at: 30, kind: 'edit', status: 'progressing', partial_result: diff('/p/a', 'a\n', 'b\n') },
  ]);
  assert.equal(files[0].notApplied, 1);
  assert.equal(files[0].pending, 1);
  assert.deepEqual(files[0].parts, [{ old_text: null, new_text: 'b\n', edits: 2 }]);
});

test('the bridge reports join the tool calls by path, and add files no tool call named', () => {
  const files = touchedFiles([task('t1', 10, 'edit', 'completed', diff('/p/a', 'x', 'y'))], [
    { path: '/p/a', name: 'a', tool: 'write', size_bytes: 1, path_blind_idx: 'AAA', updated_at: 5 },
    { path: '/p/logo.png', name: 'logo.png', tool: 'read', size_bytes: 999, path_blind_idx: 'BBB', updated_at: 20 },
    { path: '', name: 'x' },
  ]);
  assert.deepEqual(files.map((f) => f.path), ['/p/logo.png', '/p/a']);
  assert.equal(files[1].agent.path_blind_idx, 'AAA');
  assert.equal(files[1].parts.length, 1);
  assert.deepEqual(files[0].tools, ['read']);
});

test('content: text, binary by a NUL or by bytes that are not UTF-8, and a character cut by truncation', () => {
  const enc = new TextEncoder();
  assert.deepEqual(readContent(enc.encode('héllo\n')), { kind: 'text', text: 'héllo\n' });
  assert.deepEqual(readContent(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01])), { kind: 'binary' });
  assert.deepEqual(readContent(new Uint8Array([0x66, 0xff, 0xfe, 0x66])), { kind: 'binary' });
  const cut = enc.encode('ab€').subarray(0, 4); // "€" is three bytes: two of them are left
  assert.deepEqual(readContent(cut), { kind: 'binary' }, 'cut, but not said to be');
  assert.deepEqual(readContent(cut, true), { kind: 'text', text: 'ab' });
  assert.deepEqual(readContent(enc.encode('ab€'), true), { kind: 'text', text: 'ab€' }, 'a whole last character stays');
  assert.deepEqual(readContent(new Uint8Array(0)), { kind: 'text', text: '' });
  assert.equal(baseName('/a/b/c.txt'), 'c.txt');
  assert.equal(baseName('c.txt'), 'c.txt');
});
