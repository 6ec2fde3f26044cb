#!/usr/bin/env python3
"""Drive `rendergate serve` from a controller written in another language.

Starts the gate as a child process, writes NDJSON events to its stdin, and
reads NDJSON outputs from its stdout on a thread of its own, acting on each:
hold or dispatch renders on `latch`/`release`, promote or revert pods.

    python3 examples/drive_serve.py [path/to/rendergate]

Needs haproxy on PATH; the sample render comes from examples/render/.
"""

import json
import os
import queue
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "..", "target")), "debug", "rendergate")


def sample(broken=False):
    with open(os.path.join(HERE, "render", "haproxy.cfg")) as f:
        config = f.read()
    with open(os.path.join(HERE, "render", "maps", "hosts.map")) as f:
        hosts = f.read()
    if broken:
        config = config.replace("    bind :8080\n", "    bind :8080\n    http-request bogus-action\n")
    return config, [{"kind": "map", "path": "maps/hosts.map", "content": hosts}]


def main():
    gate = subprocess.Popen([BIN, "serve", "--check-interval", "0s"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    outputs = queue.Queue()

    def read():
        for line in gate.stdout:
            outputs.put(json.loads(line))
        outputs.put(None)

    threading.Thread(target=read, daemon=True).start()

    # The first line says who answers; a client refuses a protocol major it does not know.
    hello = outputs.get(timeout=30)
    if hello is None or hello["type"] != "hello" or hello["protocol"] != 1:
        sys.exit(f"not a rendergate serve speaking protocol 1: {hello}")
    print(f"gate {hello['version']}: policy {hello['policy']}, haproxy {hello['haproxy']}, "
          f"sandbox {hello['sandbox']}")

    def send(event):
        gate.stdin.write(json.dumps(event) + "\n")
        gate.stdin.flush()

    def wait_for(kind):
        while True:
            out = outputs.get(timeout=30)
            act(out)
            if out is None or out["type"] == kind:
                return out

    held = False

    def act(out):
        nonlocal held
        if out is None:
            return
        kind = out["type"]
        if kind == "verdict":
            result = "pass" if out["ok"] else "refused" if out["refused"] else "could not run"
            print(f"verdict {out['plan']} ({out['render']}): {result}")
        elif kind == "latch":
            held = out["state"] == "pessimistic"
            print(f"latch {out['state']}{' (' + out['reason'] + ')' if 'reason' in out else ''}: "
                  f"{'hold renders' if held else 'dispatch renders at once'}")
        elif kind == "release":
            print(f"release: dispatch held render {out['render']} of {out['plan']}")
        elif kind == "promote":
            print(f"promote {out['pod']}'s baseline to {out['plan']}")
        elif kind == "revert":
            print(f"revert {out['pod']} from {out['plan']} to {out['to']}")
        elif kind == "error":
            print(f"the gate refused input line {out['line']}: {out['message']}")

    good, files = sample()
    bad, _ = sample(broken=True)
    send({"type": "pods_discovered", "pods": ["haptic/haproxy-0", "haptic/haproxy-1"]})
    send({"type": "rendered", "plan": "plan-1", "render": "r-1", "config": good, "files": files})
    wait_for("verdict")
    for pod in ("haptic/haproxy-0", "haptic/haproxy-1"):
        send({"type": "applied", "pod": pod, "render": "r-1", "plan": "plan-1",
              "running_plan": "plan-1", "baseline_plan": "plan-0"})
    # The controller dispatched plan-2 at once (optimistic); pod 0 took it but did not reload yet.
    send({"type": "applied", "pod": "haptic/haproxy-0", "render": "r-2", "plan": "plan-2",
          "running_plan": "plan-1", "baseline_plan": "plan-1"})
    send({"type": "rendered", "plan": "plan-2", "render": "r-2", "config": bad, "files": files})
    wait_for("revert")
    send({"type": "rendered", "plan": "plan-3", "render": "r-3", "config": good.replace("30s", "31s"), "files": files})
    wait_for("release")
    gate.stdin.close()  # end of input: the gate drains and exits 0
    while (out := outputs.get(timeout=30)) is not None:
        act(out)
    sys.exit(gate.wait())


if __name__ == "__main__":
    main()
