// Moving between screens, and the shell's two sign-in transitions, below the
// screens that use them and main.js that provides them: the screens import
// this, not main.js, so that no module imports one that imports it back.

export function go(path) {
  location.hash = `#${path}`;
}

const shell = { signedIn: () => {}, signOut: () => {} };

// main.js hands over what signing in and out do to the shell.
export function provideShell(hooks) {
  Object.assign(shell, hooks);
}

export function signedIn() {
  shell.signedIn();
}

export function signOut() {
  shell.signOut();
}
