// GFM pipe tables in web/app/markdown.js: how a row splits into cells, what a
// delimiter row says about alignment, and where a table starts and ends. Pure
// functions: no DOM needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { splitRow, delimiterRow, tableAt } from '../../../web/app/markdown.js';

test('a row splits at its pipes; outer pipes are optional; escaped pipes and code spans stay in the cell', () => {
  assert.deepEqual(splitRow('| a | b |'), ['a', 'b']);
  assert.deepEqual(splitRow('a | b'), ['a', 'b']);
  assert.deepEqual(splitRow('|  **bold** | `x` |'), ['**bold**', '`x`']);
  assert.deepEqual(splitRow('| a \\| b | c |'), ['a | b', 'c']);
  assert.deepEqual(splitRow('| `a | b` | c |'), ['`a | b`', 'c']);
  assert.deepEqual(splitRow('| | x |'), ['', 'x']);
});

test('a delimiter row gives each column its alignment', () => {
  assert.deepEqual(delimiterRow('|---|:--|--:|:-:|'), ['', 'left', 'right', 'center']);
  assert.deepEqual(delimiterRow(' --- | --- '), ['', '']);
  assert.equal(delimiterRow('| a | b |'), null);
  assert.equal(delimiterRow('| : | - |'), null);
  assert.equal(delimiterRow('just text'), null);
});

test('a table: header, delimiter, rows up to a blank line; rows fit the header', () => {
  const lines = ['| Name | Size |', '|:-----|-----:|', '| a.txt | 1 KB |', '| b | 2 | extra |', '| c |', '', 'after'];
  const t = tableAt(lines, 0);
  assert.deepEqual(t.aligns, ['left', 'right']);
  assert.deepEqual(t.header, ['Name', 'Size']);
  assert.deepEqual(t.rows, [['a.txt', '1 KB'], ['b', '2'], ['c', '']]);
  assert.equal(t.end, 5);
});

test('no table without a matching delimiter row', () => {
  assert.equal(tableAt(['| a | b |', '| c | d |'], 0), null);
  assert.equal(tableAt(['| a | b |', '|---|'], 0), null); // column counts differ
  assert.equal(tableAt(['a | b'], 0), null);
  assert.equal(tableAt(['no pipes here', '---'], 0), null);
});

test('a table ends where a line without a pipe begins', () => {
  const t = tableAt(['a | b', '--|--', '1 | 2', 'plain text'], 0);
  assert.deepEqual(t.rows, [['1', '2']]);
  assert.equal(t.end, 3);
});
