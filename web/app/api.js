// The relay's REST API, with the spec's client rules: 4xx are not retried,
// 429 and 503 wait for Retry-After (with about 25 % jitter), other 5xx are
// retried up to three times with a growing delay where a retry cannot do a
// thing twice, and every error keeps its X-Request-ID.
//
// The token comes from auth.js, which registers itself here (useCredentials)
// rather than being imported: auth.js calls the API anonymously to sign in,
// and the two must not import each other.

// Signed out until auth.js says otherwise.
let credentials = { token: async () => null, refresh: async () => false, expired: () => {} };

export function useCredentials(provider) {
  credentials = provider;
}

// This browser's end-to-end device (e2e.js), sent as X-Relay-Device once registered: the relay
// answers confirmed_by_me relative to it, and a confirmation or a signed decision names it.
let deviceId = null;

export function useDevice(id) {
  deviceId = id || null;
}

export class ApiError extends Error {
  constructor(status, body, requestId) {
    const error = (body && body.error) || {};
    super(error.message || (status ? `HTTP ${status}` : 'The relay cannot be reached'));
    this.status = status;
    this.code = error.code || (status ? 'http_error' : 'network_error');
    this.errors = error.errors || [];
    this.details = error.details || null;
    this.retryAfterMs = error.retry_after_ms || 0;
    this.requestId = requestId || '';
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const jitter = (ms) => ms * (0.75 + Math.random() * 0.5);

// Whether sending the request again cannot repeat its effect.
const replayable = (method) => method === 'GET' || method === 'DELETE' || method === 'PATCH';

export async function api(method, path, { body, raw, contentType, signal, anonymous = false } = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = {};
    if (!anonymous) {
      const token = await credentials.token();
      if (!token) throw new ApiError(401, { error: { code: 'invalid_token', message: 'Not signed in' } });
      headers.Authorization = `Bearer ${token}`;
      if (deviceId) headers['X-Relay-Device'] = deviceId;
    }
    let payload;
    if (raw !== undefined) {
      payload = raw;
      headers['Content-Type'] = contentType || 'application/octet-stream';
    } else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    let response;
    try {
      response = await fetch(path, { method, headers, body: payload, signal, cache: 'no-store' });
    } catch (err) {
      if (err.name === 'AbortError') throw err;
      if (replayable(method) && attempt < 3) {
        await sleep(jitter(500 * 2 ** attempt));
        continue;
      }
      throw new ApiError(0, null);
    }
    const requestId = response.headers.get('X-Request-ID') || '';
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    if (response.ok && data && data.ok) return data.result;
    const error = new ApiError(response.status, data, requestId);
    console.warn(`relay: ${method} ${path} -> ${response.status} ${error.code} (request id ${requestId})`);
    if (response.status === 401 && !anonymous) {
      if (attempt === 0 && (await credentials.refresh())) continue;
      credentials.expired();
      throw error;
    }
    if ((response.status === 429 || response.status === 503) && attempt < 3 && error.code !== 'agent_degraded') {
      const header = Number(response.headers.get('Retry-After'));
      const wait = error.retryAfterMs || (header > 0 ? header * 1000 : 1000);
      await sleep(jitter(Math.min(wait, 30000)));
      continue;
    }
    if (response.status >= 500 && response.status !== 503 && replayable(method) && attempt < 3) {
      await sleep(jitter(500 * 2 ** attempt));
      continue;
    }
    throw error;
  }
}

export const get = (path, options) => api('GET', path, options);
export const post = (path, body, options) => api('POST', path, { ...options, body });
export const patch = (path, body) => api('PATCH', path, { body });
export const del = (path, body) => api('DELETE', path, { body });

// A message a person can act on, for an error of the API.
export function describe(err) {
  if (!(err instanceof ApiError)) return String(err && err.message ? err.message : err);
  const known = {
    network_error: 'The relay cannot be reached. Check your connection.',
    pairing_not_found: 'No machine is waiting with this code. Codes last two minutes: start pairing again.',
    agent_degraded: 'The agent is not answering right now. Try again in a moment.',
    installation_revoked: 'This machine was disconnected from your account.',
    session_not_found: 'This chat no longer exists.',
    approval_expired: 'This request expired before it was answered.',
    rate_limited: 'Too many requests. Wait a moment.',
    payload_too_large: 'That file is too large (25 MB at most).',
  };
  const text = known[err.code] || err.message;
  return err.requestId ? `${text} (request ${err.requestId})` : text;
}
