// The service worker and Web Push from the page's side: registering the
// worker, and subscribing this browser with the relay's VAPID key.
import { auth } from './auth.js';
import { post, del } from './api.js';

export async function registerWorker() {
  if (!('serviceWorker' in navigator)) return null;
  try {
    // A module worker: sw.js imports the app's modules it shares with the page (decision.js, crypto.js).
    return await navigator.serviceWorker.register('/sw.js', { scope: '/', type: 'module' });
  } catch (err) {
    console.warn('relay: the service worker could not be registered', err);
    return null;
  }
}

function keyBytes(b64) {
  const text = atob(b64.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

export function pushSupported() {
  return 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
}

// 'on', 'off', 'denied' or 'unsupported'.
export async function pushStatus() {
  if (!pushSupported()) return 'unsupported';
  if (Notification.permission === 'denied') return 'denied';
  const registration = await navigator.serviceWorker.ready;
  const subscription = await within(registration.pushManager.getSubscription(), 'The browser\'s push service');
  return subscription && localStorage.getItem('relay.push') === subscription.endpoint ? 'on' : 'off';
}

// How long the browser's side of turning notifications on may take (issue 35): its push service
// (Google's for Chrome, Mozilla's for Firefox, Apple's for Safari) may be unreachable, and
// PushManager.subscribe then answers nothing for a long time, or never.
export const PUSH_TIMEOUT_MS = 10000;

export class PushTimeout extends Error {}

function within(promise, what) {
  let timer = null;
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new PushTimeout(`${what} did not answer within ${PUSH_TIMEOUT_MS / 1000} s. Notifications stay off; check the connection and try again.`)),
      PUSH_TIMEOUT_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// The app's own service worker is not timed: it is local, and on a loaded phone its first start can take longer
// than the push service's limit; only what waits on the network is.
export async function enablePush() {
  const config = await auth.loadConfig();
  if (!config.push || !config.push.vapid_public_key) throw new Error('This relay does not send notifications.');
  // The person's answer to the browser's question is not timed.
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') throw new Error('Notifications are blocked for this site in the browser settings.');
  const registration = await navigator.serviceWorker.ready;
  let subscription = await within(registration.pushManager.getSubscription(), 'The browser\'s push service');
  const key = keyBytes(config.push.vapid_public_key);
  // A subscription made for another relay key would never deliver: start over.
  if (subscription && subscription.options && subscription.options.applicationServerKey) {
    const old = new Uint8Array(subscription.options.applicationServerKey);
    if (old.length !== key.length || old.some((b, i) => b !== key[i])) {
      await within(subscription.unsubscribe(), 'The browser\'s push service');
      subscription = null;
    }
  }
  if (!subscription) {
    subscription = await within(registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }),
      'The browser\'s push service');
  }
  const json = subscription.toJSON();
  await post('/v1/me/push-subscriptions', { endpoint: json.endpoint, keys: json.keys });
  localStorage.setItem('relay.push', json.endpoint);
}

export async function disablePush() {
  const endpoint = localStorage.getItem('relay.push');
  localStorage.removeItem('relay.push');
  if (pushSupported()) {
    const registration = await navigator.serviceWorker.ready;
    const subscription = await registration.pushManager.getSubscription();
    if (subscription) await subscription.unsubscribe().catch(() => {});
  }
  if (endpoint && auth.signedIn()) await del('/v1/me/push-subscriptions', { endpoint }).catch(() => {});
}
