#!/usr/bin/env python3
"""Where a one-shot check's CPU time goes: `perf` samples of N runs of
`rendergate check DIR`, per process name and per kind of work, in ms a run.

The gate is `rendergate` (its main thread), `rendergate-stan` (the thread
that makes the check's child, and that child until it becomes haproxy),
`tokio-rt-worker` (blocking threads), `rendergate-init`. Each sample is put
under the first of: the system call it is in, a page fault, the dynamic
loader, else the function it is in. BENCHMARKS.md, "Where a one-shot
check's time goes".

    cd examples/render
    perf record -F 20000 -g -o /tmp/cpu.data -- sh -c \
        'for i in $(seq 40); do rendergate check . >/dev/null 2>&1; done'
    perf script -i /tmp/cpu.data -F comm,tid,ip,sym,dso > /tmp/cpu.txt
    python3 host/benches/perf_cpu.py /tmp/cpu.txt 40 20000
"""
import collections, sys

path, runs, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per_sample = 1000 / hz / runs  # ms a run

samples, current = [], None
for line in open(path):
    if not line.strip():
        current = None
    elif not line[0].isspace():
        comm = line.split()[0]
        current = (comm, [])
        samples.append(current)
    elif current is not None:
        parts = line.split(None, 1)
        if len(parts) > 1:
            current[1].append(parts[1].split(' (')[0])


def kind(frames):
    """The work a sample is in, from its leaf up."""
    for f in frames:
        if f.startswith(('__x64_sys_', '__do_sys_')):
            return 'syscall ' + f.replace('__x64_sys_', '').replace('__do_sys_', '')
        if f == 'asm_exc_page_fault':
            return 'page fault'
        if f.startswith('_dl_'):
            return 'dynamic loader'
    return frames[0] if frames else '?'


by_comm = collections.Counter(comm for comm, _ in samples)
for comm, n in by_comm.most_common(8):
    print(f"{n * per_sample:7.2f} ms  {comm}")
for comm in ['rendergate', 'rendergate-stan', 'tokio-rt-worker']:
    kinds = collections.Counter(kind(frames) for c, frames in samples if c == comm)
    print(f"\n{comm}: {by_comm[comm] * per_sample:.2f} ms")
    for k, n in kinds.most_common(15):
        print(f"  {n * per_sample:6.3f}  {k[:90]}")
