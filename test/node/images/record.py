"""Records for the node tier: each event is a JSON line on stdout and a POST to the
test's recorder (the address in /etc/node-tier/recorder), sent in the background so
that no event waits on the network. The recorder also answers /config?pod=NAME with
the behaviour the test chose for that Pod (e.g. how long the proxy stays unready)."""

import json
import os
import queue
import socket
import sys
import threading
import time
import urllib.request

POD = socket.gethostname()
try:
    with open("/etc/node-tier/recorder") as f:
        RECORDER = f.read().strip()
except OSError:
    RECORDER = ""

_queue = queue.Queue()


def _sender():
    while True:
        body = _queue.get()
        for _ in range(20):
            try:
                request = urllib.request.Request("http://%s/record" % RECORDER, data=body, method="POST")
                urllib.request.urlopen(request, timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        _queue.task_done()


if RECORDER:
    threading.Thread(target=_sender, daemon=True).start()


def record(source, event, **fields):
    entry = dict(fields, source=source, event=event, pod=POD, time=time.time())
    line = json.dumps(entry, sort_keys=True)
    print(line, flush=True)
    if RECORDER:
        _queue.put(line.encode())


def flush(timeout=3.0):
    """Waits (bounded) until every record is sent: before the process exits."""
    deadline = time.time() + timeout
    while _queue.unfinished_tasks and time.time() < deadline:
        time.sleep(0.02)


def config():
    """The test's settings for this Pod, {} when the recorder has none or is not there."""
    if not RECORDER:
        return {}
    for _ in range(20):
        try:
            with urllib.request.urlopen("http://%s/config?pod=%s" % (RECORDER, POD), timeout=2) as response:
                return json.loads(response.read() or b"{}")
        except OSError:
            time.sleep(0.1)
    return {}


def exit_now(code):
    flush()
    sys.stdout.flush()
    os._exit(code)
