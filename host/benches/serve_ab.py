#!/usr/bin/env python3
"""Two `rendergate` binaries' own time in `serve`, alternated render by render.

The gate's own time is a verdict's wait less HAProxy's own run in it (from
the word to its exit, by the `rendergate::timing` trace), as the verdict
bench gives it, and the whole wait beside it (a change to how HAProxy's exit
is noticed moves the trace with it, and shows only there); here two builds run side by side, each render going to one
and then the other (which goes first alternates), so that a change is
judged against its baseline in the same minutes. Each render reads MAPS map
files of its own. The waits include this script's own writing and reading
(a few tenths of a millisecond): compare the two, not with the bench.

    python3 host/benches/serve_ab.py ROUNDS MAPS BINARY_A BINARY_B

`AB_CONFIG_DIR_IN=/dev/shm` runs both in the config-directory world instead
(no namespaces, as under containerd's RuntimeDefault), each with a config
directory of its own made there (/dev/shm: a memory-backed emptyDir).
"""
import datetime, json, os, statistics, subprocess, sys, tempfile, time

rounds, maps, binaries = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:5]


def start(binary):
    trace = tempfile.NamedTemporaryFile(delete=False)
    args = [binary, 'serve', '--check-interval', '0s', '--log-level', 'error,rendergate::timing=trace']
    env = dict(os.environ)
    if 'AB_CONFIG_DIR_IN' in os.environ:
        args += ['--config-dir', tempfile.mkdtemp(dir=os.environ['AB_CONFIG_DIR_IN'])]
        env['RENDERGATE_SANDBOX_DISABLE'] = 'userns,netns,mountns'
    gate = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            stderr=open(trace.name, 'w'), text=True, bufsize=1)
    return gate, open(trace.name)


def at(line):
    return datetime.datetime.fromisoformat(line.split()[0].rstrip('Z')).timestamp()


def render(round, gate):
    config = (f"# round {round} gate {gate}\nglobal\ndefaults\n  mode http\n  timeout client 1s\n"
              "  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:18080\n")
    files = []
    for i in range(maps):
        config += f"  http-request set-header x-m{i} %[req.hdr(host),map(maps/m{i}.map)]\n"
        files.append({"kind": "map", "path": f"maps/m{i}.map", "content": f"host{round} b{i}\n"})
    config += "  default_backend b0\nbackend b0\n  server s 127.0.0.1:10000\n"
    return json.dumps({"type": "rendered", "plan": f"p{round}", "render": f"r{round}",
                       "config": config, "files": files}) + "\n"


gates = [start(b) for b in binaries]
time.sleep(1.5)
own, waits = [[], []], [[], []]
for round in range(rounds):
    for which in ([0, 1] if round % 2 == 0 else [1, 0]):
        gate, trace = gates[which]
        line = render(round, which)
        time.sleep(0.3)
        started = time.perf_counter()
        gate.stdin.write(line)
        gate.stdin.flush()
        while '"verdict"' not in (out := gate.stdout.readline()):
            assert out, "serve ended"
        took = (time.perf_counter() - started) * 1000
        assert '"ok":true' in out, out
        lines = trace.read().splitlines()
        word = [at(l) for l in lines if l.endswith('word given')][-1]
        exited = [at(l) for l in lines if l.endswith('haproxy exited')][-1]
        own[which].append(took - (exited - word) * 1000)
        waits[which].append(took)
for binary, times, whole in zip(binaries, own, waits):
    print(f"{statistics.median(times):7.3f} ms own, {statistics.median(whole):7.2f} ms the whole wait (medians)  {binary}")
# Whichever goes first in a round waits longer (the second finds the caches
# warm), so the pairs are split by who went first, and the two medians
# averaged: a median over both would land on one side or the other.
for label, runs in [("own", own), ("whole wait", waits)]:
    pairs = [a - b for a, b in zip(runs[0], runs[1])]
    halves = [sorted(pairs[first::2]) for first in (0, 1)]
    a_first, b_first = (half[len(half) // 2] for half in halves)
    print(f"A - B, {label}: {(a_first + b_first) / 2:+.3f} ms "
          f"(A first {a_first:+.3f}, B first {b_first:+.3f}, medians pair by pair)")
for gate, _ in gates:
    gate.stdin.close()
    gate.wait()
