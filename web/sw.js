// The service worker: the app shell offline, and Web Push notifications.
//
// The shell (the page, its scripts, styles and icons) is cached when a new
// version installs, under a cache named after that version; the page is
// fetched from the network first and from the cache when offline, the
// versioned files from the cache first (their URLs never change content).
// The API (/v1/) is never cached: what the app shows of it comes live.
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
  `/app/${VERSION}/approvals.js`,
  `/app/${VERSION}/inbox.js`,
  `/app/${VERSION}/dictation.js`,
  `/app/${VERSION}/toolcall.js`,
  `/app/${VERSION}/blocks.js`,
  `/app/${VERSION}/diff.js`,
  `/app/${VERSION}/transcript.js`,
  `/app/${VERSION}/commands.js`,
  `/app/${VERSION}/outbox.js`,
  `/app/${VERSION}/screens.js`,
  `/app/${VERSION}/push.js`,
  `/app/${VERSION}/crypto.js`,
  `/app/${VERSION}/sealed.js`,
  `/app/${VERSION}/nacl-scope.js`,
  `/app/${VERSION}/keystore.js`,
  `/app/${VERSION}/e2e.js`,
  `/app/${VERSION}/devices.js`,
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
// so the text shows only on this device. A classic worker cannot import the app's modules: the
// envelope's opening (crypto.js open/blobKey) is repeated here, WebCrypto only.
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
  let env;
  try {
    env = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  } catch (err) {
    return null;
  }
  if (env.length === 1 && env[0] === 0) return '';
  if (env[0] !== 1 || env.length < 29) return null;
  for (const sessionKey of keys) {
    try {
      const ikm = await crypto.subtle.importKey('raw', sessionKey, 'HKDF', false, ['deriveBits']);
      const bits = await crypto.subtle.deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0),
        info: new TextEncoder().encode(`sophon/v1/blob/${path}`) }, ikm, 256);
      const key = await crypto.subtle.importKey('raw', bits, 'AES-GCM', false, ['decrypt']);
      const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: env.subarray(1, 13) }, key, env.subarray(13));
      return new TextDecoder().decode(plain);
    } catch (err) {
      // Another of the session's keys (a rotated session keeps its old ones).
    }
  }
  return null;
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
    const title = note.kind === 'approval' ? `Approval needed: ${note.title || 'a request'}` : note.title || 'Relay';
    await self.registration.showNotification(title, {
      body: note.body || '',
      tag: note.approval_id || note.session_id || 'relay',
      renotify: note.kind === 'approval',
      requireInteraction: note.kind === 'approval',
      icon: `/app/${VERSION}/icon-192.png`,
      badge: `/app/${VERSION}/icon-192.png`,
      data: { url: typeof note.url === 'string' && note.url.startsWith('/') ? note.url : '/', kind: note.kind || '' },
    });
  })());
});

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const url = new URL(event.notification.data && event.notification.data.url ? event.notification.data.url : '/', self.location.origin);
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
    for (const client of windows) {
      if (new URL(client.url).origin === self.location.origin) {
        client.postMessage({ type: 'open', url: url.pathname + url.hash });
        return client.focus();
      }
    }
    return self.clients.openWindow(url.href);
  })());
});
