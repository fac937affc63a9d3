// What a chat's transcript is made of, and how its pieces merge (no DOM, no
// network: unit-tested under Node's test runner, tests/browser/unit/).
//
// A chat shows messages, tool calls (tasks) and approvals in the order they
// happened. They reach the app three ways: the session timeline read
// (GET /v1/me/sessions/:id/timeline, docs/api.md), the event stream, and
// for messages the older history read. The same object may come by several of
// them, in any order: the merges below never let a late or stale copy undo a
// newer one (a progress event after a task's end does not reopen it, a
// timeline page read before an approval was answered does not make it pending
// again).

export const FINAL_TASK = new Set(['completed', 'failed', 'cancelled']);
const TASK_RANK = { created: 0, progressing: 1, completed: 2, failed: 2, cancelled: 2 };
const APPROVAL_RANK = { pending: 0, resolved: 1, expired: 1 };

// Tool-call kinds (ACP's, docs/bridge.md "acp:COMMAND", plus the older bridges' `exec`), as the card names them.
export const TASK_KINDS = {
  read: { label: 'Read', icon: 'read' },
  edit: { label: 'Edit', icon: 'edit' },
  delete: { label: 'Delete', icon: 'delete' },
  move: { label: 'Move', icon: 'move' },
  search: { label: 'Search', icon: 'search' },
  execute: { label: 'Run', icon: 'terminal' },
  exec: { label: 'Run', icon: 'terminal' },
  think: { label: 'Thinking', icon: 'think' },
  fetch: { label: 'Fetch', icon: 'fetch' },
  switch_mode: { label: 'Mode', icon: 'mode' },
  plan: { label: 'Plan', icon: 'plan' },
  other: { label: 'Tool', icon: 'tool' },
};

export function taskKind(kind) {
  return TASK_KINDS[kind] || TASK_KINDS.other;
}

// The one status a card shows: running until a final status, then that for good.
export function taskState(task) {
  const status = task && task.status;
  if (status === 'completed') return { state: 'completed', label: 'Done' };
  if (status === 'failed') return { state: 'failed', label: 'Failed' };
  if (status === 'cancelled') return { state: 'cancelled', label: 'Cancelled' };
  return { state: 'running', label: 'Running' };
}

const present = (value) => value !== undefined && value !== null;

// Merges what one source says of a task into what the app knew. `update.status`
// is the status that source implies (an event's name, a timeline item's field).
// A final status is never replaced by a running one, and a first final status is
// kept; fields a source leaves out (or sends as null) keep their known values.
export function mergeTask(known, update) {
  if (!known) {
    const task = {};
    for (const [key, value] of Object.entries(update)) if (present(value)) task[key] = value;
    if (!TASK_RANK.hasOwnProperty(task.status)) task.status = 'created';
    return task;
  }
  const task = { ...known };
  const knownFinal = FINAL_TASK.has(known.status);
  const updateFinal = FINAL_TASK.has(update.status);
  if (knownFinal && !updateFinal) {
    // A late progress: it may still name what the card lacks, never its state or content.
    for (const key of ['kind', 'name', 'args', 'session_id', 'interaction_id', 'created_at']) {
      if (!present(task[key]) && present(update[key])) task[key] = update[key];
    }
    return task;
  }
  for (const [key, value] of Object.entries(update)) {
    if (key === 'status' || key === 'seen_at') continue;
    if (present(value)) task[key] = value;
  }
  if (!knownFinal && (TASK_RANK[update.status] || 0) >= (TASK_RANK[known.status] || 0)) task.status = update.status;
  if (!present(task.seen_at) && present(update.seen_at)) task.seen_at = update.seen_at;
  return task;
}

// The same for approvals: resolved and expired are final, and a decision once known stays.
export function mergeApproval(known, update) {
  if (!known) return { status: 'pending', ...update };
  const approval = { ...known };
  const knownFinal = (APPROVAL_RANK[known.status] || 0) > 0;
  for (const [key, value] of Object.entries(update)) {
    if (key === 'status' || key === 'seen_at') continue;
    if (knownFinal && (key === 'decision' || key === 'scope' || key === 'scope_value') && present(known[key])) continue;
    if (present(value)) approval[key] = value;
  }
  if (!knownFinal && present(update.status)) approval.status = update.status;
  return approval;
}

// The view of a timeline item the app keeps (docs/api.md "Timeline"): { type, value }.
export function timelineEntry(item) {
  if (!item || typeof item !== 'object') return null;
  if (item.type === 'message' && item.message) return { type: 'message', value: item.message };
  if (item.type === 'task' && item.task) return { type: 'task', value: item.task };
  if (item.type === 'approval' && item.approval) {
    const a = item.approval;
    const status = a.state === 'resolved' || a.state === 'expired' ? a.state : 'pending';
    return { type: 'approval', value: { ...a, status } };
  }
  return null;
}

// A message of a history or timeline page against what the app knew. Returns
// the merged message, or null to keep the known one (a reply followed live
// whose deltas are ahead of the page). `fromHistory` marks a reply the page
// caught mid-stream: it is followed by polling, not by deltas (docs/web.md).
export function mergePageMessage(known, message) {
  // A message this device could not open (no key yet: sealed.js) gives way to any page that brings it.
  if (known && known.locked && !message.locked) return { ...known, ...message, fromHistory: message.state !== 'final' };
  const live = known && known.fromHistory === false;
  if (live && known.state !== 'final' && message.state !== 'final' && (known.text || '').length >= (message.text || '').length) return null;
  if (known && known.state === 'final' && message.state !== 'final') return null;
  return { ...known, ...message, fromHistory: live ? false : message.state !== 'final' };
}

// Whether an agent message ends its turn. One that ended because the agent went on
// to a tool call (docs/bridge.md "acp:COMMAND": `finish_reason: "tool_call"`) does not: the turn goes
// on, in the next message.
export function endsTurn(m) {
  return !!m && m.role === 'agent' && m.state === 'final' && m.finish_reason !== 'tool_call';
}

// Whether a message is not shown: a turn that begins with a tool call ends its placeholder
// there, empty, as a tool call (docs/api.md); the text after the tool call is the next message.
export function isHiddenMessage(m) {
  return !!m && m.role === 'agent' && m.state === 'final' && m.finish_reason === 'tool_call' && !/\S/.test(m.text || '');
}

// The agent's name for people: ACP agents name themselves by their npm package (the Installation's
// `agent.name`, from ACP's agentInfo), which says nothing to a person reading "@zed-industries/claude-agent-acp
// on laptop will answer". The agents relay-bridge is made for by their product's name; any other scoped
// package by its name without the scope; anything else as it came. '' for none.
const AGENT_LABELS = {
  'claude-agent-acp': 'Claude Code',
  'claude-code-acp': 'Claude Code',
  'codex-acp': 'Codex',
  'gemini-cli': 'Gemini CLI',
  gemini: 'Gemini CLI',
};

export function agentLabel(name) {
  if (typeof name !== 'string' || !name.trim()) return '';
  const bare = name.trim().replace(/^@[^/]+\//, '');
  return AGENT_LABELS[bare.toLowerCase()] || bare;
}

// Whether an agent's message is only an empty typing bubble that an approval of its turn holds up
// (`waiting`: the interaction ids with an approval pending): the agent writes nothing until the user
// answers, so the bubble, its dots and its time are not shown then (the card is what waits).
export function isHeldBubble(m, waiting) {
  return !!m && m.role === 'agent' && m.state === 'streaming' && !/\S/.test(m.text || '') && !!waiting && waiting.has(m.interaction_id);
}

// Messages of ordered timeline items that something of their own turn follows (a tool call, an approval,
// the next message): the agent writes the text after those in a new message below them (docs/bridge.md,
// "Text after a tool call is a new agent message"), so such a message shows no typing dots even while it is
// still open. Returns the set of their ids.
export function settledMessages(items) {
  const settled = new Set();
  const later = new Set();
  for (let i = items.length - 1; i >= 0; i--) {
    const { type, id, value } = items[i];
    const turn = value && value.interaction_id;
    if (type === 'message' && turn && later.has(turn)) settled.add(id);
    if (turn) later.add(turn);
  }
  return settled;
}

// When an item happened, for ordering: the relay's time when known, else when the app first saw it.
export function itemAt(value) {
  return value.created_at || value.ts || value.seen_at || 0;
}

// Items the stream brings without a time of their own (tasks, approvals) are
// dated when they arrive, never before what arrived earlier: `liveAt(last, now)`.
// The stream delivers in the order things happened, so when a dated item
// (a message) arrives, whatever arrived before it happened before it:
// `pinBefore(undated, at)` moves undated items dated at or after `at` just
// before it (after the latest item dated before it), keeping their order.
// Each value's `seen_at` is its date.
export const TICK = 0.001;

export function liveAt(last, now) {
  return Math.max(now, (last || 0) + TICK);
}

export function pinBefore(undated, at, datedBefore = -Infinity) {
  const late = undated.filter((v) => v.seen_at >= at).sort((x, y) => x.seen_at - y.seen_at);
  if (!late.length) return 0;
  // Between the latest item left where it was (`datedBefore`: the latest dated one before `at`) and `at`,
  // in their order: nothing that arrived earlier is passed.
  let floor = datedBefore < at ? datedBefore : -Infinity;
  for (const v of undated) if (v.seen_at < at && v.seen_at > floor) floor = v.seen_at;
  const step = Number.isFinite(floor) ? (at - floor) / (late.length + 1) : TICK;
  late.forEach((v, i) => { v.seen_at = Number.isFinite(floor) ? floor + step * (i + 1) : at - TICK * (late.length - i); });
  return late.length;
}

const TYPE_RANK = { message: 0, task: 1, approval: 2 };

// Items { type, at, id, tie } in the order things happened; ties as the relay
// breaks them: message before task before approval, then the order the relay
// keeps them in (`tie`: larger is later; see tieAfter), then by id.
export function orderItems(items) {
  return items.slice().sort((x, y) => x.at - y.at || TYPE_RANK[x.type] - TYPE_RANK[y.type] ||
    (x.tie || 0) - (y.tie || 0) || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
}

// Two items of one millisecond (a reply written 0 ms after its prompt) are in the
// relay's order only as the app saw them come: each page lists them newest first,
// the stream in the order they happened. `ties` hands out the numbers that keep
// that order: live(), ever increasing, for what the stream brings; page(n), a block
// below every earlier one, for the n items of a page read (the i-th, newest first,
// gets block - i). An item keeps the first number it gets.
export function ties() {
  let live = 0;
  let floor = 0;
  return {
    live: () => ++live,
    page: (n) => {
      const block = floor - 1;
      floor = block - n;
      return block;
    },
  };
}

// A plan task's entries (docs/bridge.md "acp:COMMAND"): the final list once it ended, else the latest.
export function planEntries(task) {
  const from = (r) => (r && typeof r === 'object' && Array.isArray(r.entries) ? r.entries : null);
  const entries = (FINAL_TASK.has(task.status) && from(task.result)) || from(task.partial_result) || from(task.result) || [];
  return entries.filter((e) => e && typeof e === 'object').map((e) => ({
    content: typeof e.content === 'string' ? e.content : '',
    status: ['pending', 'in_progress', 'completed'].includes(e.status) ? e.status : 'pending',
    priority: ['high', 'medium', 'low'].includes(e.priority) ? e.priority : null,
  }));
}

// A thinking task's text so far.
export function thinkingText(task) {
  for (const r of [task.result, task.partial_result]) if (r && typeof r === 'object' && typeof r.text === 'string') return r.text;
  return '';
}

// The content blocks a tool call carries (docs/api.md "Content blocks"): the result's, else the latest partial result's.
export function contentBlocks(task) {
  for (const r of [task.result, task.partial_result]) {
    if (r && typeof r === 'object' && Array.isArray(r.content)) return r.content.filter((b) => b && typeof b === 'object' && typeof b.type === 'string');
  }
  return [];
}

// A tool's text output wrapped whole in a markdown code fence (Claude Code sends a
// command's output as "```console\n…\n```"): the text inside, since the block is
// shown monospace anyway. Anything else is left as it is.
export function unfence(text) {
  const match = /^\s*(`{3,})[\w.+-]*[ \t]*\n([\s\S]*?)\n?\1\s*$/.exec(text);
  return match && !match[2].includes(match[1]) ? match[2] : text;
}

// What is left of a result to show under "Result" once its blocks are shown:
// an ACP result's raw output, or a result of another shape whole. null when nothing.
export function resultDetail(task) {
  const r = task.result;
  if (!present(r)) return null;
  if (typeof r === 'object' && !Array.isArray(r) && ('content' in r || 'locations' in r || 'raw_output' in r || 'terminal' in r)) {
    return present(r.raw_output) ? r.raw_output : null;
  }
  if (typeof r === 'object' && Object.keys(r).length === 0) return null;
  return r;
}

// An error's text: a string, an object's message, or its JSON.
export function errorText(error) {
  if (!present(error)) return '';
  if (typeof error === 'string') return error;
  if (typeof error === 'object' && typeof error.message === 'string') return error.message;
  return JSON.stringify(error);
}

// Arguments worth showing: null, undefined and {} are not.
export function argsDetail(args) {
  if (!present(args)) return null;
  if (typeof args === 'object' && !Array.isArray(args) && Object.keys(args).length === 0) return null;
  return args;
}
