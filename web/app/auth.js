// Signing in, and where the token is kept (docs/web.md).
//
// The token lives in localStorage of the relay's own origin. An installed app
// must stay signed in across restarts, and the API takes a bearer token, not a
// cookie (so there is no CSRF to defend). What localStorage costs is that a
// script running in the page could read it; the Content-Security-Policy allows
// no script but the app's own files, and the app never turns text into markup,
// which is the defence (ui.js, markdown.js).
//
// Two ways in: a sign-in link from `relayd login-link` (the embedded issuer),
// whose one-time code is exchanged at POST /v1/login/exchange; or an OpenID
// Connect provider, with the authorization-code flow and PKCE, refreshed with
// its refresh token.
import { api, useCredentials } from './api.js';
import { shareAuth } from './handoff.js';

const KEY = 'relay.auth';
const PKCE_KEY = 'relay.pkce';
const REFRESH_EARLY_MS = 60 * 1000;

function load() {
  try {
    return JSON.parse(localStorage.getItem(KEY)) || null;
  } catch (err) {
    return null;
  }
}

function save(value) {
  if (value) localStorage.setItem(KEY, JSON.stringify(value));
  else localStorage.removeItem(KEY);
  // The service worker answers notifications with the same token (handoff.js).
  shareAuth(value);
}

function b64url(bytes) {
  let text = '';
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// exp of a JWT in milliseconds, or 0. The relay checks the signature; the app
// only wants to know when to refresh.
function expiresAt(jwt) {
  try {
    const payload = JSON.parse(atob(jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
    return typeof payload.exp === 'number' ? payload.exp * 1000 : 0;
  } catch (err) {
    return 0;
  }
}

async function discovery(issuer) {
  const base = issuer.replace(/\/+$/, '');
  const response = await fetch(`${base}/.well-known/openid-configuration`, { cache: 'no-store' });
  if (!response.ok) throw new Error(`the identity provider's discovery document answered ${response.status}`);
  const doc = await response.json();
  if (!doc.authorization_endpoint || !doc.token_endpoint) throw new Error('the discovery document lacks endpoints');
  return doc;
}

let refreshing = null;

export const auth = {
  config: null,
  state: load(),
  listeners: new Set(),

  async loadConfig() {
    if (!this.config) this.config = await api('GET', '/v1/web/config', { anonymous: true });
    return this.config;
  },

  signedIn() {
    return !!(this.state && this.state.token);
  },

  userId() {
    return this.state ? this.state.user_id || '' : '';
  },

  onChange(fn) {
    this.listeners.add(fn);
  },

  set(value) {
    this.state = value;
    save(value);
    for (const fn of this.listeners) fn(value);
  },

  async token() {
    if (!this.state) return null;
    if (this.state.refresh_token && this.state.expires_at && this.state.expires_at - Date.now() < REFRESH_EARLY_MS)
      await this.refresh();
    return this.state ? this.state.token : null;
  },

  // A fresh token from the provider's refresh token; false when there is none or it failed.
  async refresh() {
    if (!this.state || !this.state.refresh_token) return false;
    if (!refreshing) {
      refreshing = (async () => {
        try {
          const config = await this.loadConfig();
          const doc = await discovery(config.auth.issuer);
          const response = await fetch(doc.token_endpoint, {
            method: 'POST',
            headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: this.state.refresh_token,
              client_id: config.auth.client_id }),
          });
          if (!response.ok) return false;
          this.adopt(await response.json(), config.auth.token);
          return true;
        } catch (err) {
          return false;
        } finally {
          setTimeout(() => { refreshing = null; }, 0);
        }
      })();
    }
    return refreshing;
  },

  // The relay refused the token: the person has to sign in again.
  expired() {
    this.set(null);
  },

  async exchangeLink(code) {
    const result = await api('POST', '/v1/login/exchange', { body: { code }, anonymous: true });
    this.set({ mode: 'link', token: result.token, user_id: result.user_id, expires_at: result.expires_at });
  },

  async startOidc() {
    const config = await this.loadConfig();
    const doc = await discovery(config.auth.issuer);
    const verifier = b64url(crypto.getRandomValues(new Uint8Array(48)));
    const state = b64url(crypto.getRandomValues(new Uint8Array(24)));
    const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
    sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
    const url = new URL(doc.authorization_endpoint);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: config.auth.client_id,
      redirect_uri: `${location.origin}/login`,
      scope: config.auth.scope,
      state,
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }).toString();
    location.assign(url.toString());
  },

  // Back from the provider at /login?code=...&state=...
  async completeOidc(params) {
    const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) || 'null');
    sessionStorage.removeItem(PKCE_KEY);
    if (params.get('error')) throw new Error(params.get('error_description') || params.get('error'));
    if (!saved || saved.state !== params.get('state')) throw new Error('The sign-in did not start here; try again.');
    const config = await this.loadConfig();
    const doc = await discovery(config.auth.issuer);
    const response = await fetch(doc.token_endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: params.get('code'),
        redirect_uri: `${location.origin}/login`, client_id: config.auth.client_id, code_verifier: saved.verifier }),
    });
    if (!response.ok) throw new Error(`The identity provider refused the sign-in (${response.status}).`);
    this.adopt(await response.json(), config.auth.token);
  },

  adopt(tokens, which) {
    const token = which === 'id_token' ? tokens.id_token : tokens.access_token;
    if (!token) throw new Error(`The identity provider sent no ${which}.`);
    let user = '';
    try {
      user = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))).sub || '';
    } catch (err) {
      user = '';
    }
    this.set({ mode: 'oidc', token, user_id: user, expires_at: expiresAt(token),
      refresh_token: tokens.refresh_token || (this.state && this.state.refresh_token) || null });
  },

  signOut() {
    this.set(null);
  },
};

// The API's calls carry this token (api.js does not import this module: it would be a cycle).
useCredentials(auth);
// A sign-in kept from before the service worker needed it, handed over once per load.
shareAuth(auth.state);
