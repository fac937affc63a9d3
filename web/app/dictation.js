// Dictation in the composer (docs/web.md "Dictation"): a microphone button
// where the browser offers speech recognition (the Web Speech API's
// SpeechRecognition, webkitSpeechRecognition in Chromium and Safari), none
// where it does not. The words go into the composer as they are recognised,
// the guesses still being refined (interim results) included, and nothing
// leaves with them: what is in the composer is sent when the user sends, as
// if typed. A tap on the button stops listening; so does sending, and typing.
//
// The recogniser is the browser's: Chromium sends the audio to its vendor's
// speech service, Safari may recognise on the device. That is the browser's
// doing, not the relay's; the relay only ever gets the text the user sends.
import { h, icon, toast, announce } from './ui.js';

// What each of the Web Speech API's errors means for the person dictating; the rest are said as they come.
const ERRORS = {
  'not-allowed': 'The microphone is not allowed for this site: allow it in the browser\u2019s site settings to dictate.',
  'service-not-allowed': 'This browser does not allow dictation here.',
  'no-speech': 'No speech was heard. Tap the microphone and speak.',
  'audio-capture': 'No microphone was found.',
  network: 'Dictation needs a network connection in this browser.',
  'language-not-supported': 'Dictation does not support this language.',
};

export function recogniserClass() {
  if (typeof window === 'undefined') return null;
  return window.SpeechRecognition || window.webkitSpeechRecognition || null;
}

// The pieces of text a recogniser gave, as one line: each trimmed, one space between two.
export function joinPieces(pieces) {
  return pieces.map((p) => String(p || '').trim()).filter(Boolean).join(' ');
}

// The button for input (a textarea), or null where the browser has no speech recognition.
// Writing into input raises an 'input' event, so that the composer grows and its / list follows.
export function dictation(input) {
  const Recogniser = recogniserClass();
  if (!Recogniser) return null;
  let rec = null;
  let base = ''; // what the composer held when listening started
  let finals = []; // the final results so far, by index
  let written = null; // the text dictation last wrote: anything else there was typed

  // A key typed while listening: the typing wins (the events this module raises are not trusted ones).
  const typed = (event) => {
    if (rec && event.isTrusted && input.value !== written) stop(true);
  };
  input.addEventListener('input', typed);

  const button = h('button', { type: 'button', class: 'icon-btn dictate', 'aria-label': 'Dictate', 'aria-pressed': 'false',
    onclick: () => (rec ? stop(false) : start()) }, icon('mic'));

  function show(listening) {
    button.classList.toggle('dictate-on', listening);
    button.setAttribute('aria-pressed', String(listening));
    button.setAttribute('aria-label', listening ? 'Stop dictation' : 'Dictate');
  }

  function write(text) {
    written = text;
    input.value = text;
    input.dispatchEvent(new Event('input', { bubbles: true }));
  }

  function onResult(event) {
    if (event.target !== rec) return;
    // Typed into meanwhile: the typing wins, and listening stops.
    if (input.value !== written) {
      stop(true);
      return;
    }
    const results = event.results || [];
    const interim = [];
    for (let i = event.resultIndex || 0; i < results.length; i++) {
      const result = results[i];
      const transcript = result && result[0] ? result[0].transcript : '';
      if (result.isFinal) finals[i] = transcript;
      else interim.push(transcript);
    }
    const said = joinPieces([...finals, ...interim]);
    write(base && said ? `${base}${/\s$/.test(base) ? '' : ' '}${said}` : base || said);
  }

  function start() {
    let r;
    try {
      r = new Recogniser();
      r.lang = navigator.language || document.documentElement.lang || 'en';
      r.interimResults = true;
      r.continuous = true;
      r.maxAlternatives = 1;
    } catch (err) {
      toast('Dictation could not start in this browser', 'error');
      return;
    }
    r.onresult = onResult;
    r.onerror = (event) => {
      if (event.target !== rec || event.error === 'aborted') return;
      toast(ERRORS[event.error] || `Dictation stopped: ${event.error || 'unknown error'}`, 'error');
    };
    r.onend = () => {
      if (rec !== r) return;
      rec = null;
      show(false);
    };
    rec = r;
    base = input.value;
    finals = [];
    written = base;
    try {
      r.start();
    } catch (err) {
      rec = null;
      toast('Dictation could not start: it may already be listening in another tab', 'error');
      return;
    }
    show(true);
    announce('Listening');
    input.focus({ preventScroll: true });
  }

  // abort: drop what is still being recognised (sending, typing, leaving); else let the last words come.
  function stop(abort) {
    const r = rec;
    if (!r) return;
    if (abort) {
      // Whatever the recogniser says after this is not written: the composer is the user's again.
      rec = null;
      show(false);
      try {
        r.abort();
      } catch (err) {
        // already ended
      }
      return;
    }
    try {
      r.stop();
    } catch (err) {
      rec = null;
      show(false);
    }
  }

  return {
    button,
    stop: () => stop(true),
    dispose: () => {
      input.removeEventListener('input', typed);
      stop(true);
    },
  };
}
