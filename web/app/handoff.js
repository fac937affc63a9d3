// What the page hands the service worker so that it can answer an approval from
// its notification with no window open (docs/web.md "Approve or deny from the
// notification"): the user's token, as auth.js holds it. A service worker cannot
// read localStorage, where the page keeps it, so auth.js mirrors every change
// here, in IndexedDB of the same origin (database relay-worker, store auth, one
// record under the key "current"); signing out deletes it. Only what a request
// needs is copied: the token, its expiry and the user id, never an OpenID
// Connect refresh token (the worker does not refresh: an expired token makes it
// ask the person to open the app).
const DB_NAME = 'relay-worker';
const STORE = 'auth';
const KEY = 'current';

function open() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(DB_NAME, 1);
    req.onupgradeneeded = () => {
      if (!req.result.objectStoreNames.contains(STORE)) req.result.createObjectStore(STORE);
    };
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function run(mode, fn) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = fn(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}

// The page: state is auth.js's ({ token, user_id, expires_at, ... }) or null when signed out.
export async function shareAuth(state) {
  if (typeof indexedDB === 'undefined') return;
  try {
    if (state && state.token) {
      await run('readwrite', (s) => s.put({ token: state.token, user_id: state.user_id || '', expires_at: state.expires_at || 0 }, KEY));
    } else {
      await run('readwrite', (s) => s.delete(KEY));
    }
  } catch (err) {
    // Private browsing may refuse IndexedDB: the notifications then only open the app.
    console.warn('relay: the service worker cannot be given the sign-in', err);
  }
}

// The service worker: { token, user_id, expires_at } or null.
export async function sharedAuth() {
  try {
    return (await run('readonly', (s) => s.get(KEY))) || null;
  } catch (err) {
    return null;
  }
}
