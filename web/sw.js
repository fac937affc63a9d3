// The service worker: the app shell offline, and Web Push notifications.
//
// The shell (the page, its scripts, styles and icons) is cached when a new
// version installs, under a cache named after that version; the page is
// fetched from the network first and from the cache when offline, the
// versioned files from the cache first (their URLs never change content).
// The API (/v1/) is never cached: what the app shows of it comes live.
//
// A module worker (push.js registers it with type "module"): it imports the
// app's own modules for what it shares with the page, the envelope's opening
// (crypto.js) and an approval decision's signature (decision.js, by notify.js),
// rather than a copy of them.
import { openText } from '/app/@VERSION@/crypto.js';
import { approvalActions, answerApproval } from '/app/@VERSION@/notify.js';

const VERSION = '@VERSION@';
const CACHE = `relay-${VERSION}`;
const SHELL = [
  '/',
  '/manifest.webmanifest',
  `/app/${VERSION}/app.css`,
  `/app/${VERSION}/theme.js`,
  `/app/${VERSION}/main.js`,
  `/app/${VERSION}/nav.js`,
  `/app/${VERSION}/api.js`,
  `/app/${VERSION}/auth.js`,
  `/app/${VERSION}/sse.js`,
  `/app/${VERSION}/state.js`,
  `/app/${VERSION}/capabilities.js`,
  `/app/${VERSION}/ui.js`,
  `/app/${VERSION}/markdown.js`,
  `/app/${VERSION}/chat.js`,
  `/app/${VERSION}/files.js`,
  `/app/${VERSION}/touched.js`,
  `/app/${VERSION}/approvals.js`,
  `/app/${VERSION}/inbox.js`,
  `/app/${VERSION}/dictation.js`,
  `/app/${VERSION}/toolcall.js`,
  `/app/${VERSION}/shell.js`,
  `/app/${VERSION}/usage.js`,
  `/app/${VERSION}/queued.js`,
  `/app/${VERSION}/blocks.js`,
  `/app/${VERSION}/diff.js`,
  `/app/${VERSION}/transcript.js`,
  `/app/${VERSION}/commands.js`,
  `/app/${VERSION}/outbox.js`,
  `/app/${VERSION}/screens.js`,
  `/app/${VERSION}/newchat.js`,
  `/app/${VERSION}/agents.js`,
  `/app/${VERSION}/steer.js`,
  `/app/${VERSION}/push.js`,
  `/app/${VERSION}/crypto.js`,
  `/app/${VERSION}/sealed.js`,
  `/app/${VERSION}/nacl-scope.js`,
  `/app/${VERSION}/keystore.js`,
  `/app/${VERSION}/e2e.js`,
  `/app/${VERSION}/devices.js`,
  `/app/${VERSION}/decision.js`,
  `/app/${VERSION}/handoff.js`,
  `/app/${VERSION}/notify.js`,
  `/app/${VERSION}/vendor/tweetnacl/nacl-fast.js`,
  `/app/${VERSION}/icon.svg`,
  `/app/${VERSION}/icon-192.png`,
];

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name.startsWith('relay-') && name !== CACHE) await caches.delete(name);
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== 'GET' || url.origin !== self.location.origin || url.pathname.startsWith('/v1/')) return;
  if (event.request.mode === 'navigate') {
    // The page: fresh when online (a new version shows at once), the cached shell when not.
    event.respondWith(fetch(event.request).catch(async () => (await caches.match('/', { cacheName: CACHE })) || Response.error()));
    return;
  }
  if (url.pathname.startsWith('/app/')) {
    event.respondWith(caches.match(event.request, { cacheName: CACHE }).then((hit) => hit || fetch(event.request)));
  }
});

// ---- an encrypted session's push (docs/web.md "End-to-end encryption") ----
// The relay sends {session_id, message_id, kind, text_ct} or, for an approval, details_ct: no
// plaintext. The worker opens it with the session's keys, which the page keeps in IndexedDB
// (keystore.js: database relay-e2e, store sessions, {session_id, keys: [{key, at}]} newest first),
// so the text shows only on this device; crypto.js opens the envelope as the page does.
function readKeys(sessionId) {
  return new Promise((resolve) => {
    const req = indexedDB.open('relay-e2e', 1);
    req.onupgradeneeded = () => {
      // No keys were ever kept on this device: leave the database for the page to create.
      req.transaction.abort();
    };
    req.onerror = () => resolve([]);
    req.onsuccess = () => {
      const db = req.result;
      try {
        const get = db.transaction('sessions', 'readonly').objectStore('sessions').get(sessionId);
        get.onsuccess = () => resolve(((get.result && get.result.keys) || []).map((k) => k.key));
        get.onerror = () => resolve([]);
      } catch (err) {
        resolve([]);
      }
    };
  });
}

async function openField(keys, path, b64) {
  try {
    return await openText(keys, path, b64);
  } catch (err) {
    // A malformed envelope: the generic words stay.
    return null;
  }
}

// The push's title and body in clear, when this device holds the key; else the relay's generic words.
async function openPush(note) {
  if (!note.session_id || (!note.text_ct && !note.details_ct)) return note;
  const keys = await readKeys(note.session_id);
  // The relay's generic title stays for a reply; an approval's says "Approval needed: a request" until opened.
  const out = note.kind === 'approval' ? { ...note, title: null, body: '' } : { ...note, title: note.title || 'New message', body: 'Open the app to read it.' };
  if (!keys.length) return out;
  if (note.text_ct) {
    const text = await openField(keys, `messages/${note.session_id}`, note.text_ct);
    if (text !== null) out.body = text.length > 180 ? `${text.slice(0, 179)}…` : text;
  }
  if (note.details_ct) {
    const text = await openField(keys, `approvals/${note.session_id}`, note.details_ct);
    try {
      const details = text === null ? null : JSON.parse(text);
      if (details && typeof details === 'object') {
        if (details.title) out.title = details.title;
        out.body = details.command || details.message || '';
        out.opened = true;
      }
    } catch (err) {
      // Not JSON: the generic words stay.
    }
  }
  return out;
}

self.addEventListener('push', (event) => {
  let note = {};
  try {
    note = event.data ? event.data.json() : {};
  } catch (err) {
    note = { title: 'Relay', body: event.data ? event.data.text() : '' };
  }
  event.waitUntil((async () => {
    note = await openPush(note);
    const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    // A reply the person is looking at needs no notification; an approval always gets one.
    if (note.kind === 'reply' && windows.some((w) => w.visibilityState === 'visible' && w.focused)) return;
    const approval = note.kind === 'approval';
    const title = approval ? `Approval needed: ${note.title || 'a request'}` : note.title || 'Relay';
    const options = {
      body: note.body || '',
      tag: note.approval_id || note.session_id || 'relay',
      renotify: approval,
      requireInteraction: approval,
      icon: `/app/${VERSION}/icon-192.png`,
      badge: `/app/${VERSION}/icon-192.png`,
      data: { url: typeof note.url === 'string' && note.url.startsWith('/') ? note.url : '/', kind: note.kind || '' },
    };
    if (approval && note.approval_id) {
      // What a tap on Approve or Deny needs to answer without the app (notify.js), and the words of a follow-up.
      Object.assign(options.data, { approval_id: note.approval_id, session_id: note.session_id || '',
        installation_id: note.installation_id || '', encrypted: !!note.encrypted, title: note.title || '', severity: note.severity || '' });
      // An encrypted request this device could not open shows no words of its own: nothing to approve blind.
      options.actions = approvalActions(note, !note.encrypted || !!note.opened);
    }
    await self.registration.showNotification(title, options);
  })());
});

// The app, focused (or opened) on url.
async function openApp(url) {
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  for (const client of windows) {
    if (new URL(client.url).origin === self.location.origin) {
      client.postMessage({ type: 'open', url: url.pathname + url.hash });
      return client.focus();
    }
  }
  return self.clients.openWindow(url.href);
}

// A tap on the notification opens its chat; a tap on Approve or Deny answers with no window
// (docs/web.md "Approve or deny from the notification"), and what went wrong, or was already
// decided, comes back as a notification of its own under the same tag.
self.addEventListener('notificationclick', (event) => {
  const notification = event.notification;
  const data = notification.data || {};
  const url = new URL(data.url || '/', self.location.origin);
  notification.close();
  // An approval opens its chat at the approval's card (the inbox's ?at=, docs/web.md "Inbox").
  if (data.kind === 'approval' && data.approval_id && url.hash.startsWith('#/s/') && !url.hash.includes('?')) {
    url.hash += `?at=${encodeURIComponent(`a:${data.approval_id}`)}`;
  }
  if (data.kind !== 'approval' || (event.action !== 'approve' && event.action !== 'deny')) {
    event.waitUntil(openApp(url));
    return;
  }
  event.waitUntil((async () => {
    const followUp = await answerApproval(data, event.action);
    if (!followUp) return;
    await self.registration.showNotification(followUp.title, {
      body: followUp.body,
      tag: data.approval_id,
      icon: `/app/${VERSION}/icon-192.png`,
      badge: `/app/${VERSION}/icon-192.png`,
      data: { url: url.pathname + url.hash, kind: 'followup', approval_id: data.approval_id },
    });
  })());
});
