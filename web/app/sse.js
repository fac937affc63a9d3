// The event stream (GET /v1/me/stream) read with fetch: EventSource cannot
// send an Authorization header, and a token in the URL is refused (400
// invalid_token_location). Resume follows the spec: Last-Event-ID on every
// reconnect, backoff from 1 s doubling to 30 s with jitter, reset once the
// stream is open; a stream that stays silent past its heartbeat is dropped.
import { auth } from './auth.js';

const BACKOFF_START_MS = 1000;
const BACKOFF_MAX_MS = 30000;

export class EventStream {
  constructor({ onEvent, onState }) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastEventId = null;
    this.backoff = BACKOFF_START_MS;
    this.controller = null;
    this.running = false;
    this.timer = null;
    this.state = 'idle';
    this.wake = null;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop();
  }

  stop() {
    this.running = false;
    if (this.controller) this.controller.abort();
    if (this.wake) this.wake();
  }

  // Reconnects now (the browser came back online, the page became visible).
  nudge() {
    this.backoff = BACKOFF_START_MS;
    if (this.wake) this.wake();
  }

  setState(state, detail) {
    this.state = state;
    this.onState(state, detail);
  }

  async sleep(ms) {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = null;
  }

  async loop() {
    while (this.running) {
      let wait = 0;
      try {
        await this.connect();
        wait = this.backoff;
      } catch (err) {
        if (!this.running) break;
        if (err.status === 401) {
          if (await auth.refresh()) continue;
          auth.expired();
          break;
        }
        wait = err.retryAfterMs || this.backoff;
        this.setState('offline', { retryInMs: wait });
      }
      if (!this.running) break;
      // spec: reconnect backoff starts at 1 s and doubles to a 30 s cap, with jitter.
      await this.sleep(wait * (0.75 + Math.random() * 0.5));
      this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
    }
  }

  async connect() {
    const token = await auth.token();
    if (!token) throw Object.assign(new Error('signed out'), { status: 401 });
    this.controller = new AbortController();
    const headers = { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' };
    if (this.lastEventId !== null) headers['Last-Event-ID'] = this.lastEventId;
    this.setState('connecting');
    let response;
    try {
      response = await fetch('/v1/me/stream', { headers, signal: this.controller.signal, cache: 'no-store' });
    } catch (err) {
      throw Object.assign(new Error('network'), { status: 0 });
    }
    if (!response.ok) {
      const retry = Number(response.headers.get('Retry-After'));
      throw Object.assign(new Error(`stream ${response.status}`), {
        status: response.status,
        retryAfterMs: retry > 0 ? retry * 1000 : 0,
      });
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let event = { id: null, name: 'message', data: [] };
    let silenceMs = 60000;
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => this.controller.abort(), silenceMs);
    };
    arm();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buffer += decoder.decode(value, { stream: true });
        let newline;
        while ((newline = buffer.search(/\r\n|\n|\r/)) >= 0) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer[newline] === '\r' && buffer[newline + 1] === '\n' ? 2 : 1));
          if (line === '') {
            if (event.data.length > 0 || event.name !== 'message') {
              const name = event.name;
              let data = {};
              try {
                data = JSON.parse(event.data.join('\n') || '{}');
              } catch (err) {
                data = {};
              }
              if (event.id !== null) this.lastEventId = event.id;
              if (name === 'hello') {
                // Open: the backoff starts over, and a stream silent for two heartbeats is dead.
                this.backoff = BACKOFF_START_MS;
                silenceMs = Math.max(2 * (data.heartbeat_ms || 25000) + 3000, 4000);
                arm();
                this.setState('live');
              }
              this.onEvent(name, data);
            }
            event = { id: null, name: 'message', data: [] };
          } else if (!line.startsWith(':')) {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let val = colon < 0 ? '' : line.slice(colon + 1);
            if (val.startsWith(' ')) val = val.slice(1);
            if (field === 'data') event.data.push(val);
            else if (field === 'event') event.name = val;
            else if (field === 'id') event.id = val;
          }
        }
      }
    } catch (err) {
      if (!this.running) return;
    } finally {
      clearTimeout(watchdog);
    }
    if (this.running) this.setState('offline', { retryInMs: this.backoff });
  }
}
