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
  `/app/${VERSION}/toolcall.js`,
  `/app/${VERSION}/blocks.js`,
  `/app/${VERSION}/diff.js`,
  `/app/${VERSION}/transcript.js`,
  `/app/${VERSION}/commands.js`,
  `/app/${VERSION}/outbox.js`,
  `/app/${VERSION}/screens.js`,
  `/app/${VERSION}/push.js`,
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

self.addEventListener('push', (event) => {
  let note = {};
  try {
    note = event.data ? event.data.json() : {};
  } catch (err) {
    note = { title: 'Relay', body: event.data ? event.data.text() : '' };
  }
  event.waitUntil((async () => {
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
