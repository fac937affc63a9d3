// Which user messages wait for an earlier turn (docs/web.md "Queued messages"): an agent answers one
// message of a chat at a time (relay-bridge queues the next one, docs/bridge.md "A message sent while
// a turn runs"), so a message sent while an earlier turn is still open is shown as queued until that
// turn ends. Pure.

const blank = (text) => !/\S/.test(text || '');
// When a message was made: created_at as the relay gives it (an ISO time) or as a number of ms.
export const madeAt = (m) => (typeof m.created_at === 'number' ? m.created_at : Date.parse(m.created_at || '') || 0);

// The interactions whose turn is queued, from a chat's messages (any order): their user message is
// shown as queued, and their reply's empty placeholder not at all (nothing is being written yet).
export function queuedTurns(messages) {
  const list = [...messages].filter((m) => m && m.interaction_id)
    .sort((a, b) => madeAt(a) - madeAt(b));
  // A turn is open while an agent message of it streams; it has begun once one of them has text.
  const open = new Set();
  const begun = new Set();
  const ended = new Set();
  for (const m of list) {
    if (m.role !== 'agent') continue;
    if (m.state === 'streaming') open.add(m.interaction_id);
    else if (m.finish_reason !== 'tool_call') ended.add(m.interaction_id);
    if (!blank(m.text)) begun.add(m.interaction_id);
  }
  const queued = new Set();
  let earlierOpen = false;
  for (const m of list) {
    if (m.role !== 'user') continue;
    const id = m.interaction_id;
    const waiting = !begun.has(id) && !ended.has(id);
    if (earlierOpen && waiting) queued.add(id);
    if (open.has(id) && !ended.has(id)) earlierOpen = true;
  }
  return queued;
}
