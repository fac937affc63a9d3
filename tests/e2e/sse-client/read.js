'use strict';
/*
 * Reads relayd's event stream with an independent SSE client library (the
 * `eventsource` package, a WHATWG EventSource for Node) for the end-to-end
 * tests, and prints one JSON line per event on stdout:
 *
 *   {"type": <event name>, "id": <the library's lastEventId>, "data": <raw data string>}
 *
 * Lines whose type starts with "@" report the client's own state: "@open",
 * "@error" (with status and readyState), "@timeout".
 *
 * Usage: RELAY_TOKEN=<user token> node read.js URL [--count N] [--timeout-ms MS]
 *                                               [--last-event-id ID]
 *
 * Exits 0 after N events other than heartbeats, 3 on timeout, 4 when the
 * library gives up (a non-retryable HTTP status such as 401), 2 on bad usage.
 * Reconnection after a dropped connection is the library's own, with its own
 * Last-Event-ID; --last-event-id sets the initial one.
 */
const EventSource = require('eventsource');

// Every event name of the spec and the brief, plus the stream's own.
const EVENT_TYPES = [
  'message', 'hello', 'heartbeat', 'resync',
  'message_added', 'message_delta', 'message_finalized',
  'session_created', 'session_renamed', 'session_updated', 'session_deleted',
  'installation_created', 'installation_revoked', 'installation_updated',
  'agent_health_changed',
  'task_created', 'task_progress', 'task_completed', 'task_failed', 'task_cancelled',
  'approval_requested', 'approval_resolved', 'approval_expired',
  'device_capability_request'
];

function usage (message) {
  process.stderr.write(message + '\nusage: RELAY_TOKEN=... node read.js URL [--count N] ' +
                       '[--timeout-ms MS] [--last-event-id ID]\n');
  process.exit(2);
}

function parseArgs (argv) {
  const opts = { url: null, count: Infinity, timeoutMs: 30000, lastEventId: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage('missing value for ' + arg);
      return argv[++i];
    };
    if (arg === '--count') opts.count = parseInt(value(), 10);
    else if (arg === '--timeout-ms') opts.timeoutMs = parseInt(value(), 10);
    else if (arg === '--last-event-id') opts.lastEventId = value();
    else if (arg.startsWith('--')) usage('unknown option ' + arg);
    else if (opts.url === null) opts.url = arg;
    else usage('unexpected argument ' + arg);
  }
  if (opts.url === null) usage('missing URL');
  if (!(opts.count > 0) || !(opts.timeoutMs > 0)) usage('bad --count or --timeout-ms');
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const token = process.env.RELAY_TOKEN;
if (!token) usage('RELAY_TOKEN is not set');

function out (obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const headers = { Authorization: 'Bearer ' + token };
if (opts.lastEventId !== undefined) headers['Last-Event-ID'] = opts.lastEventId;
const es = new EventSource(opts.url, { headers });

let finished = false;
function finish (code) {
  if (finished) return;
  finished = true;
  es.close();
  // Let stdout drain before exiting.
  process.stdout.write('', () => process.exit(code));
}

let counted = 0;
for (const type of EVENT_TYPES) {
  es.addEventListener(type, (event) => {
    out({ type: event.type, id: event.lastEventId, data: event.data });
    if (type !== 'heartbeat' && ++counted >= opts.count) finish(0);
  });
}

es.onopen = () => out({ type: '@open' });
es.onerror = (err) => {
  out({
    type: '@error',
    status: (err && err.status) || null,
    message: (err && err.message) || null,
    readyState: es.readyState
  });
  // The library closes itself right after reporting a non-retryable status.
  setImmediate(() => {
    if (es.readyState === EventSource.CLOSED) finish(4);
  });
};

// This timer also keeps the process alive while the library waits to reconnect.
setTimeout(() => {
  out({ type: '@timeout' });
  finish(3);
}, opts.timeoutMs);
