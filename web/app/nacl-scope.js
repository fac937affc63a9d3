// tweetnacl (vendor/tweetnacl/nacl-fast.js) is a script that registers itself as `self.nacl`. Browsers and
// workers have `self`; Node, where the unit tests import the app's pure modules, has not: there it
// is the global object. Imported by crypto.js just before the library, and a no-op in a browser.
if (typeof self === 'undefined') globalThis.self = globalThis;
