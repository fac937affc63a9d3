// The app's shell: sign-in, the routes (in the URL fragment), the connection
// banner, and the event stream that keeps everything current.
import { auth } from './auth.js';
import { describe } from './api.js';
import { EventStream } from './sse.js';
import { store, on, applyEvent, reload, setConnection, pollInFlight, inFlight, relayReachable } from './state.js';
import { startOutbox, flushOutbox } from './outbox.js';
import { h, clear, icon, toast, announce } from './ui.js';
import { registerWorker } from './push.js';
import * as screens from './screens.js';
import { chatView } from './chat.js';
import { filesView } from './files.js';
import { provideShell } from './nav.js';
import { start as startDevice, grant, fetchKeys, refreshDevices, openStreamEvent, holdEnrolCode, holdPairingEnrol, regrantWaiting } from './e2e.js';
import { verifyView } from './devices.js';
import { inboxView, inboxBadge } from './inbox.js';

const wide = window.matchMedia('(min-width: 960px)');
let stream = null;
let cleanup = null;
let started = false;
// From sign-in until the first load (the device, /v1/me, the history) is through: a screen opened meanwhile
// is drawn once, by the render that ends the load, not drawn and then rebuilt under the user's fingers
// (a code typed on Verify, a chat's text, would be thrown away).
let loading = false;

// #/<name>/<arg>?<query>: the query is the verify screen's (from=, where to go back to).
function route() {
  const [hash, search] = (location.hash.replace(/^#/, '') || '/').split('?');
  const parts = hash.split('/').filter(Boolean).map(decodeURIComponent);
  // #/approvals, the screen the inbox replaced, is the inbox (links and notifications made before it).
  const name = parts[0] === 'approvals' ? 'inbox' : parts[0] || 'home';
  return { name, arg: parts[1] || null, query: new URLSearchParams(search || '') };
}

// A link relay-bridge prints, #/verify/<installation id>?enrol=<code>: the code is held in this tab for
// that machine's Verify screen and taken out of the address bar and the history at once (it is one
// use, but a secret until then). The fragment never reaches relayd.
function takeEnrolCode() {
  const { name, arg, query } = route();
  if (name !== 'verify' || !query.has('enrol')) return;
  if (arg) holdEnrolCode(arg, query.get('enrol'));
  query.delete('enrol');
  const rest = query.toString();
  history.replaceState(history.state, '', `#/verify/${encodeURIComponent(arg || '')}${rest ? `?${rest}` : ''}`);
}

const views = {
  home: (main) => (wide.matches ? screens.welcomeView(main) : screens.sessionsView(main)),
  s: (main, arg, query) => chatView(main, arg, query.get('at')),
  files: (main, arg) => filesView(main, arg),
  new: (main, arg) => screens.newChatView(main, arg),
  machines: (main) => screens.installationsView(main),
  pair: (main, arg) => screens.pairView(main, arg),
  inbox: (main) => inboxView(main),
  settings: (main) => screens.settingsView(main),
  verify: (main, arg, query) => verifyView(main, arg, query),
};

function render() {
  const main = document.getElementById('main');
  if (!main) return;
  if (cleanup) cleanup();
  cleanup = null;
  clear(main);
  takeEnrolCode();
  const { name, arg, query } = route();
  const view = views[name] || views.home;
  cleanup = view(main, arg, query) || null;
  // The item a chat was opened at (?at=, from the inbox) is shown once: the address goes back to the chat's own.
  if (name === 's' && query.has('at')) history.replaceState(history.state, '', `#/s/${encodeURIComponent(arg)}`);
  for (const link of document.querySelectorAll('.tabs a')) {
    const current = link.dataset.route === name || ((name === 's' || name === 'files') && link.dataset.route === 'home');
    if (current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.body.dataset.route = name;
  // Screen readers land on the new screen's heading.
  const heading = main.querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    if (document.activeElement === document.body || !main.contains(document.activeElement)) heading.focus({ preventScroll: true });
  }
}

function banner() {
  const el = document.getElementById('banner');
  if (!el) return;
  const state = store.connection;
  // The device's network is down, or the network is up and the relay does not answer: two different things to say.
  const deviceOffline = !navigator.onLine;
  const offline = deviceOffline || !relayReachable();
  const retry = state === 'offline' && store.retryInMs ? ` in ${Math.ceil(store.retryInMs / 1000)} s` : '';
  el.hidden = !offline && state !== 'connecting';
  el.className = `banner banner-${offline ? 'offline' : 'connecting'}`;
  el.textContent = deviceOffline
    ? `You are offline. Reconnecting${retry}…`
    : offline
      ? `The relay cannot be reached. Retrying${retry}…`
      : 'Connecting…';
  document.body.dataset.connection = offline ? 'offline' : state;
}

let unbadge = null;

function shell() {
  const app = document.getElementById('app');
  clear(app);
  const tab = (routeName, href, label, iconName, extra) =>
    h('a', { href, dataset: { route: routeName } }, icon(iconName), h('span', { text: label }), extra || null);
  app.append(
    h('a', { class: 'skip-link', href: '#main', onclick: (e) => { e.preventDefault(); document.getElementById('main').focus(); }, text: 'Skip to content' }),
    h('div', { id: 'banner', class: 'banner', role: 'status', 'aria-live': 'polite', hidden: true }),
    h('div', { class: 'layout' },
      h('nav', { class: 'tabs', 'aria-label': 'Sections' },
        tab('home', '#/', 'Chats', 'chats'),
        tab('machines', '#/machines', 'Machines', 'machines'),
        tab('inbox', '#/inbox', 'Inbox', 'inbox', h('span', { id: 'inbox-badge', class: 'badge', hidden: true })),
        tab('settings', '#/settings', 'Settings', 'settings')),
      h('aside', { id: 'sidebar', class: 'sidebar', 'aria-label': 'Chats' }),
      h('main', { id: 'main', tabindex: '-1' })));
  screens.sessionsList(document.getElementById('sidebar'), true);
  banner();
  if (unbadge) unbadge();
  unbadge = inboxBadge(document.getElementById('inbox-badge'));
}

// Events are opened (an encrypted session's *_ct fields, e2e.js) before the store takes them, one
// after the other: opening is asynchronous (WebCrypto), the order of a reply's deltas is not.
let events = Promise.resolve();
let rereading = null;
let caughtUp = false; /* the stream has answered once since it was started */

// The account, the chat on screen (if one is) and the snapshot, read again.
function reloadHere() {
  const { name: view, arg } = route();
  return reload(view === 's' ? arg : null);
}

// What went to no stream of this page (before its first one answered, or past what a resync could
// replay): the keys granted to this device meanwhile first (read from the newest one held), since
// session_key_granted is an event too and a chat read without its key stays locked; then the rest.
async function catchUp() {
  await fetchKeys().catch((err) => console.warn('relay: the keys granted meanwhile could not be read', err));
  return reloadHere();
}

// A key arrived (what was read without it: titles, the open chats, pending approvals), or the stream
// first answered: read again, once for a burst of them.
function rereadSoon() {
  clearTimeout(rereading);
  rereading = setTimeout(() => catchUp().catch(() => {}), 150);
}

async function streamEvent(name, data) {
  if (name === 'session_key_granted') {
    if (await grant(data)) rereadSoon();
    return;
  }
  if (name === 'device_added' || name === 'device_revoked') await refreshDevices().catch(() => {});
  const opened = await openStreamEvent(name, data);
  if (name === 'approval_requested') announce(`Approval needed: ${opened.title || opened.action}`, true);
  applyEvent(name, opened);
}

function startStream() {
  if (stream) return;
  caughtUp = false;
  stream = new EventStream({
    onEvent: (name, data) => {
      if (name === 'resync') {
        // spec: the buffer no longer holds what we missed: reload history and the snapshot (and the keys).
        catchUp().catch((err) => toast(describe(err), 'error'));
        return;
      }
      events = events.then(() => streamEvent(name, data)).catch((err) => console.warn(`relay: event ${name}`, err));
    },
    onState: (state, detail) => {
      const was = store.connection;
      setConnection(state, detail);
      // The relay answers again (or for the first time): what the outbox holds goes now.
      if (state === 'live' && was !== 'live') flushOutbox();
      // The app started while the relay was away: what it could not read then, it reads now.
      if (state === 'live' && !store.user) {
        reloadHere().then(render, (err) => toast(describe(err), 'error'));
      } else if (state === 'live' && !caughtUp) {
        // The cold launch read /v1/me before this stream was attached (spec "Client-side resume"):
        // what happened in between went to no stream of this page, and a first connection has no
        // Last-Event-ID to replay it from. Read once more when the stream first answers, keys included.
        rereadSoon();
      }
      if (state === 'live') caughtUp = true;
      if (state === 'live' && was !== 'live' && was !== 'idle') {
        // Back after a drop: a reply in flight may have finished meanwhile.
        for (const [sessionId, c] of store.chats) if (c.loaded && inFlight(sessionId).length) pollInFlight(sessionId);
      }
    },
  });
  stream.start();
}

async function startSignedIn() {
  shell();
  const { name, arg } = route();
  loading = true;
  try {
    // This browser's device and the session keys it holds, before anything sealed is read.
    await startDevice(auth.userId() || (store.user && store.user.id));
    // spec: /v1/me, the history, the snapshot, then the stream.
    await reload(name === 's' ? arg : null);
    regrantWaiting([...store.sessions.values()]).catch(() => {});
  } catch (err) {
    if (!auth.signedIn()) {
      loading = false;
      return;
    }
    toast(describe(err), 'error');
  }
  // What this device could not send before (a reload, a closed tab) is shown and sent when the relay answers.
  if (auth.userId() || store.user) startOutbox(auth.userId() || store.user.id);
  loading = false;
  render();
  startStream();
}

function showLogin(message) {
  if (stream) {
    stream.stop();
    stream = null;
  }
  const app = document.getElementById('app');
  clear(app);
  const main = h('main', { id: 'main', class: 'login-main', tabindex: '-1' });
  app.append(main);
  screens.loginView(main, message);
}

// The paths the relay serves the app at besides /: a sign-in link, a provider's answer, a pairing link.
async function arrive() {
  const path = location.pathname;
  takeEnrolCode();
  if (path === '/pair') {
    const code = new URLSearchParams(location.search).get('code') || '';
    // The bridge's pairing link may carry its enrolment code in the fragment: kept in this tab for the
    // installation that claim returns (screens.js), out of the address bar at once.
    const enrol = new URLSearchParams(location.hash.replace(/^#/, '')).get('enrol');
    if (enrol) holdPairingEnrol(code, enrol);
    history.replaceState(null, '', `/#/pair/${encodeURIComponent(code)}`);
  } else if (path === '/login') {
    const fragment = new URLSearchParams(location.hash.replace(/^#/, ''));
    const query = new URLSearchParams(location.search);
    // Out of the address bar and the history at once: the code is spent, but it is still a secret until then.
    history.replaceState(null, '', '/');
    if (fragment.get('code')) {
      try {
        await auth.exchangeLink(fragment.get('code'));
      } catch (err) {
        return `This sign-in link cannot be used: ${describe(err)}`;
      }
    } else if (query.get('code') || query.get('error')) {
      try {
        await auth.completeOidc(query);
      } catch (err) {
        return `Sign-in failed: ${err.message}`;
      }
    }
  }
  return null;
}

async function boot() {
  registerWorker();
  const message = await arrive();
  auth.onChange((value) => {
    if (!value) showLogin('You were signed out. Sign in again to continue.');
  });
  window.addEventListener('hashchange', () => {
    if (auth.signedIn() && !loading) render();
  });
  // Only home differs between a phone's layout and a wide one. Rebuilding any other screen on a resize or a
  // rotation would throw away what it holds: a chat's typed text and its attachments being uploaded.
  wide.addEventListener('change', () => auth.signedIn() && !loading && route().name === 'home' && render());
  window.addEventListener('online', () => {
    banner();
    flushOutbox();
    if (stream) stream.nudge();
  });
  window.addEventListener('offline', banner);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && stream && store.connection !== 'live') stream.nudge();
  });
  on('connection', banner);
  // A notification clicked while the app is open: the worker asks the page to go there.
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.addEventListener('message', (event) => {
      if (event.data && event.data.type === 'open' && typeof event.data.url === 'string') {
        const url = new URL(event.data.url, location.origin);
        if (url.origin === location.origin) location.hash = url.hash;
      }
    });
  }
  if (auth.signedIn()) {
    started = true;
    await startSignedIn();
  } else {
    showLogin(message);
  }
}

function signedIn() {
  if (started) {
    loading = false;
    if (auth.userId()) startOutbox(auth.userId());
    shell();
    render();
    startStream();
    startDevice(auth.userId()).then(() => reload(null)).catch(() => {});
    return;
  }
  started = true;
  startSignedIn();
}

function signOut() {
  if (stream) {
    stream.stop();
    stream = null;
  }
  started = false;
  auth.signOut();
}

provideShell({ signedIn, signOut });
boot();
