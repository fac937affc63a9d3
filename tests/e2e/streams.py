"""Clients for relayd's two live channels, used by the end-to-end tests.

EventStream reads GET /v1/me/stream on a thread with the project's own small
SSE parser (one test also reads it with an independent library).
BridgeSocket speaks the bridge's WebSocket with python3-websockets on a
thread of its own, so that tests stay synchronous.
"""
import asyncio
import concurrent.futures
import json
import queue
import threading
import time

import requests
import websockets

TIMEOUT = 15.0


class Event:
    def __init__(self, name, data, id):
        self.name = name
        self.data = data
        self.id = id

    def __repr__(self):
        return "Event(%r, id=%r, %s)" % (self.name, self.id, json.dumps(self.data)[:200])


class EventStream:
    """GET /v1/me/stream, parsed into Event objects as they arrive."""

    def __init__(self, relay, token, last_event_id=None, headers=None):
        h = {"Authorization": "Bearer " + token, "Accept": "text/event-stream"}
        if last_event_id is not None:
            h["Last-Event-ID"] = str(last_event_id)
        h.update(headers or {})
        self.response = requests.get(relay.url("/v1/me/stream"), headers=h, stream=True, timeout=(5, 60))
        self.status = self.response.status_code
        self.headers = self.response.headers
        self.events = []
        self.closed = threading.Event()
        self._cond = threading.Condition()
        if self.status == 200:
            threading.Thread(target=self._read, daemon=True).start()
        else:
            self.closed.set()

    def _read(self):
        name, data, id = None, [], None
        try:
            for raw in self.response.iter_lines(decode_unicode=True):
                line = raw if raw is not None else ""
                if line == "":
                    if data:
                        event = Event(name or "message", json.loads("\n".join(data)), id)
                        with self._cond:
                            self.events.append(event)
                            self._cond.notify_all()
                    name, data, id = None, [], None
                elif line.startswith(":"):
                    continue
                else:
                    field, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if field == "event":
                        name = value
                    elif field == "data":
                        data.append(value)
                    elif field == "id":
                        id = value
        except Exception:
            pass
        finally:
            self.closed.set()
            with self._cond:
                self._cond.notify_all()

    def names(self):
        with self._cond:
            return [e.name for e in self.events]

    def wait_for(self, name, predicate=None, timeout=TIMEOUT, after=0):
        """Waits for the first event called `name` (at index >= after) that satisfies predicate."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events[after:]:
                    if event.name == name and (predicate is None or predicate(event.data)):
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or self.closed.is_set():
                    raise AssertionError("no %s event within %.1fs; got %r" % (name, timeout, self.events))
                self._cond.wait(left)

    def wait_count(self, count, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.events) < count:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed.is_set():
                    raise AssertionError("%d events expected, got %r" % (count, self.events))
                self._cond.wait(left)
            return list(self.events)

    def close(self):
        # The reader thread sits in a blocking read: shut the socket down so that it returns at once.
        try:
            self.response.raw._fp.fp.raw._sock.shutdown(2)
        except Exception:
            pass
        self.response.close()
        self.closed.wait(TIMEOUT)


class BridgeSocket:
    """The bridge's WebSocket on a thread: frames in a queue, send() from the test."""

    def __init__(self, relay, bridge_token, auto_pong=True):
        self.url = relay.url("/v1/bridge/ws").replace("http://", "ws://")
        self.frames = queue.Queue()
        self.auto_pong = auto_pong
        self.close_code = None
        self.close_reason = None
        self.handshake_error = None
        self._loop = asyncio.new_event_loop()
        self._ws = None
        self._opened = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bridge_token,), daemon=True)
        self._thread.start()
        self._opened.wait(TIMEOUT)

    def _run(self, token):
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main(token))

    async def _main(self, token):
        try:
            self._ws = await websockets.connect(self.url, extra_headers={"Authorization": "Bearer " + token},
                                                open_timeout=TIMEOUT, ping_interval=None, max_size=2 ** 22)
        except Exception as e:  # the upgrade was refused
            self.handshake_error = e
            self._opened.set()
            self._closed.set()
            return
        self._opened.set()
        try:
            async for message in self._ws:
                frame = json.loads(message)
                if frame.get("type") == "ping" and self.auto_pong:
                    await self._ws.send(json.dumps({"type": "pong"}))
                self.frames.put(frame)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self._ws.close_code
            self.close_reason = self._ws.close_reason
            self._closed.set()

    @property
    def connected(self):
        return self._ws is not None and self.handshake_error is None

    def _in_loop(self, make_coroutine):
        """Runs make_coroutine() on the socket's loop and returns a concurrent Future of its result.

        The coroutine is made on the loop, when it gets there: one made here and handed to
        run_coroutine_threadsafe is never awaited when the loop has already stopped (the socket
        closed), and what the caller meant to send silently never went."""
        result = concurrent.futures.Future()

        def finish(task):
            if task.cancelled():
                result.set_exception(ConnectionError("the socket's loop cancelled the call"))
            elif task.exception() is not None:
                result.set_exception(task.exception())
            else:
                result.set_result(task.result())

        def start():
            if result.set_running_or_notify_cancel():
                asyncio.ensure_future(make_coroutine()).add_done_callback(finish)

        self._loop.call_soon_threadsafe(start)
        return result

    def send(self, frame):
        text = json.dumps(frame)
        self._in_loop(lambda: self._ws.send(text)).result(TIMEOUT)

    def next(self, timeout=TIMEOUT, skip_pings=True):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no frame within %.1fs" % timeout)
            try:
                frame = self.frames.get(timeout=left)
            except queue.Empty:
                raise AssertionError("no frame within %.1fs" % timeout)
            if skip_pings and frame.get("type") == "ping":
                continue
            return frame

    def next_update(self, timeout=TIMEOUT):
        frame = self.next(timeout)
        assert frame["type"] == "update", frame
        return frame["update"]

    def ack(self, update_id):
        self.send({"type": "ack", "up_to_update_id": str(update_id)})

    def wait_closed(self, timeout=TIMEOUT):
        assert self._closed.wait(timeout), "socket still open after %.1fs" % timeout
        return self.close_code

    def close(self):
        # The loop stops as soon as the read loop ends, which may be before close() itself
        # returns: schedule the close and wait for the reader to see the socket end.
        if self._ws is not None and not self._closed.is_set():
            self._in_loop(self._ws.close)
        assert self._closed.wait(TIMEOUT), "socket did not close"
