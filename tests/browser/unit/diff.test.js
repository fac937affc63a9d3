// The line diff of the diff view (web/app/diff.js), under Node's test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { splitLines, diffLines, hunks, stats } from '../../../web/app/diff.js';

// Rebuilds both texts from the ops: whatever the diff, old and new must come back.
function sides(ops) {
  return {
    old: ops.filter((o) => o.type !== 'add').map((o) => o.text),
    new: ops.filter((o) => o.type !== 'del').map((o) => o.text),
  };
}

function numbering(ops) {
  let o = 0;
  let n = 0;
  for (const op of ops) {
    if (op.type !== 'add') assert.equal(op.old, ++o);
    else assert.equal(op.old, null);
    if (op.type !== 'del') assert.equal(op.new, ++n);
    else assert.equal(op.new, null);
  }
}

test('lines: a final newline adds no empty line, CRLF is one line ending', () => {
  assert.deepEqual(splitLines(''), []);
  assert.deepEqual(splitLines(null), []);
  assert.deepEqual(splitLines('a'), ['a']);
  assert.deepEqual(splitLines('a\n'), ['a']);
  assert.deepEqual(splitLines('a\r\nb\r\n'), ['a', 'b']);
  assert.deepEqual(splitLines('a\n\n'), ['a', '']);
});

test('a one-line change in the middle', () => {
  const { ops, exact } = diffLines('a\nb\nc\n', 'a\nB\nc\n');
  assert.equal(exact, true);
  assert.deepEqual(ops.map((o) => `${o.type} ${o.old} ${o.new} ${o.text}`),
    ['same 1 1 a', 'del 2 null b', 'add null 2 B', 'same 3 3 c']);
  assert.deepEqual(stats(ops), { added: 1, removed: 1 });
});

test('a new file (old text null) is all added; a deleted one all removed', () => {
  const created = diffLines(null, 'x\ny\n');
  assert.deepEqual(created.ops.map((o) => o.type), ['add', 'add']);
  assert.deepEqual(created.ops.map((o) => o.new), [1, 2]);
  const removed = diffLines('x\ny\n', '');
  assert.deepEqual(removed.ops.map((o) => o.type), ['del', 'del']);
});

test('identical texts: no change, one fold', () => {
  const { ops } = diffLines('a\nb\n', 'a\nb\n');
  assert.deepEqual(stats(ops), { added: 0, removed: 0 });
  assert.deepEqual(hunks(ops).map((p) => p.type), ['fold']);
  assert.deepEqual(hunks([]), []);
});

test('the diff is minimal: insertions and deletions spread through a file', () => {
  const old = 'a b c a b b a'.split(' ').join('\n');
  const neu = 'c b a b a c'.split(' ').join('\n');
  const { ops } = diffLines(old, neu);
  // Myers' classic example: edit distance 5.
  const { added, removed } = stats(ops);
  assert.equal(added + removed, 5);
  assert.deepEqual(sides(ops), { old: old.split('\n'), new: neu.split('\n') });
  numbering(ops);
});

test('random edits: both sides come back, numbering holds, and the script is no longer than the edits made', () => {
  let seed = 7;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let round = 0; round < 200; round++) {
    const old = Array.from({ length: rand(40) }, () => `line ${rand(8)}`);
    const neu = old.slice();
    let edits = 0;
    for (let e = rand(6); e > 0; e--) {
      edits++;
      if (neu.length && rand(2)) neu.splice(rand(neu.length), 1);
      else neu.splice(rand(neu.length + 1), 0, `new ${rand(5)}`);
    }
    const { ops, exact } = diffLines(old.join('\n'), neu.join('\n'));
    assert.equal(exact, true);
    assert.deepEqual(sides(ops), { old, new: neu });
    numbering(ops);
    const { added, removed } = stats(ops);
    assert.ok(added + removed <= edits, `round ${round}: ${added + removed} > ${edits}`);
  }
});

test('the size guard: past the edit budget the diff is "replace whole", at once', () => {
  const old = Array.from({ length: 3000 }, (_, i) => `old ${i}`).join('\n');
  const neu = Array.from({ length: 3000 }, (_, i) => `new ${i}`).join('\n');
  const started = Date.now();
  const { ops, exact } = diffLines(old, neu);
  assert.ok(Date.now() - started < 2000, 'no freeze');
  assert.equal(exact, false);
  assert.deepEqual(stats(ops), { added: 3000, removed: 3000 });
  assert.deepEqual(sides(ops), { old: old.split('\n'), new: neu.split('\n') });
  // Past MAX_LINES it does not even try.
  const big = diffLines('a\nb\nc', 'a\nx\nc', { maxLines: 2 });
  assert.equal(big.exact, true, 'a one-line middle is within any budget');
  const tooMany = diffLines('a\nb\nc\nd', 'x\nb\ny\nd', { maxLines: 2 });
  assert.equal(tooMany.exact, false);
  numbering(tooMany.ops);
});

test('a big file with two small changes: exact, fast, and folded around the changes', () => {
  const lines = Array.from({ length: 20000 }, (_, i) => `line ${i}`);
  const changed = lines.slice();
  changed[100] = 'changed 100';
  changed.splice(15000, 0, 'inserted');
  const started = Date.now();
  const { ops, exact } = diffLines(lines.join('\n'), changed.join('\n'));
  assert.ok(Date.now() - started < 2000);
  assert.equal(exact, true);
  assert.deepEqual(stats(ops), { added: 2, removed: 1 });
  const parts = hunks(ops, 3);
  assert.deepEqual(parts.map((p) => p.type), ['fold', 'lines', 'fold', 'lines', 'fold']);
  assert.equal(parts[0].lines.length, 97);
  assert.deepEqual(parts[1].lines.map((o) => o.type), ['same', 'same', 'same', 'del', 'add', 'same', 'same', 'same']);
  assert.equal(parts[1].lines[0].old, 98);
  assert.equal(parts.reduce((n, p) => n + p.lines.length, 0), ops.length);
});

test('folds shorter than three lines stay shown', () => {
  const { ops } = diffLines('a\n1\n2\n3\n4\n5\n6\n7\n8\nb', 'A\n1\n2\n3\n4\n5\n6\n7\n8\nB');
  // Context 3 after the first change and before the last leaves 2 unchanged lines between: not folded.
  assert.deepEqual(hunks(ops, 3).map((p) => p.type), ['lines']);
  assert.deepEqual(hunks(ops, 2).map((p) => p.type), ['lines', 'fold', 'lines']);
});
