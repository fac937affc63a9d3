// The agent's commands in the composer (no DOM: unit-tested under Node's test
// runner). An installation lists them (`commands`, docs/api.md: name without
// the leading "/", description, input_hint); typing "/" at the start of the
// composer offers them.

export const MAX_OFFERED = 50;
// A description matches from this many letters typed: one or two letters are in most sentences.
export const DESCRIPTION_MIN = 3;

// The command name being typed: "/" then no space yet. null when the composer holds anything else.
export function commandQuery(value) {
  const match = /^\/([^\s/]*)$/.exec(value || '');
  return match ? match[1] : null;
}

function normalise(command) {
  if (!command || typeof command !== 'object' || typeof command.name !== 'string') return null;
  const name = command.name.replace(/^\//, '').trim();
  if (!name) return null;
  return {
    name,
    description: typeof command.description === 'string' ? command.description : '',
    input_hint: typeof command.input_hint === 'string' ? command.input_hint : '',
  };
}

// The commands that match what was typed: names that start with it first, then
// names that contain it, then descriptions that do (from DESCRIPTION_MIN letters); each group in the agent's order.
export function filterCommands(commands, query, limit = MAX_OFFERED) {
  const list = (Array.isArray(commands) ? commands : []).map(normalise).filter(Boolean);
  const q = (query || '').toLowerCase();
  const starts = [];
  const contains = [];
  const described = [];
  const seen = new Set();
  for (const c of list) {
    if (seen.has(c.name)) continue;
    const name = c.name.toLowerCase();
    if (name.startsWith(q)) starts.push(c);
    else if (name.includes(q)) contains.push(c);
    else if (q.length >= DESCRIPTION_MIN && c.description.toLowerCase().includes(q)) described.push(c);
    else continue;
    seen.add(c.name);
  }
  return [...starts, ...contains, ...described].slice(0, limit);
}

// The command a composer's text starts with ("/name " and maybe its input), or null.
export function commandIn(commands, value) {
  const match = /^\/(\S+)\s/.exec(value || '');
  if (!match) return null;
  for (const c of (Array.isArray(commands) ? commands : []).map(normalise)) if (c && c.name === match[1]) return c;
  return null;
}
