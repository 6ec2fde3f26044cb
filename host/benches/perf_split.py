#!/usr/bin/env python3
"""Splits the verdict bench's (gate - bare) into HAProxy's own run and the rest.

HAProxy's own run is from its exec to its exit (sched:sched_process_exec and
sched:sched_process_exit), the gate's run paired with the bare run right
after it, as the bench pairs them; the median of the per-round differences is
what the sandbox adds inside HAProxy's run (Landlock, seccomp), the rest of
the bench's figure is the gate's own path. BENCHMARKS.md, "Where a check's
time goes".

    B=$(ls target/release/deps/verdict-* | grep -v '\.d$' | head -1)
    perf record -o /tmp/v.data -e sched:sched_process_exec \
        -e sched:sched_process_exit -e sched:sched_process_fork -- $B --rounds 31
    perf script -i /tmp/v.data -F comm,pid,tid,cpu,time,event,trace > /tmp/v.txt
    python3 host/benches/perf_split.py /tmp/v.txt
"""
import re, sys, statistics as st
ev=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s*(\S.*?)\s+(\d+)/(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)',l)
    if not m: continue
    comm,pid,tid,t,name,rest=m.groups(); ev.append((float(t)*1e3,comm,int(pid),name,rest))
bench=next(e[2] for e in ev if e[1].startswith('verdict-'))
parent={}
for e in ev:
    if e[3]=='sched:sched_process_fork':
        m=re.search(r'child_pid=(\d+)',e[4]); parent[int(m.group(1))]=e[2]
execs={e[2]:e[0] for e in ev if e[3]=='sched:sched_process_exec' and 'haproxy' in e[4]}
exits={e[2]:e[0] for e in ev if e[3]=='sched:sched_process_exit' and 'group_dead=true' in e[4] and e[2] in execs}
runs=sorted((execs[p],exits[p]-execs[p],parent.get(p)==bench) for p in execs if p in exits)
# pair: gate run followed by bare run
g=[];b=[]
for i in range(len(runs)-1):
    if not runs[i][2] and runs[i+1][2]:
        g.append(runs[i][1]); b.append(runs[i+1][1])
n=len(g)//6
for k,label in enumerate(['100p','100r','1kp','1kr','10kp','10kr']):
    gg=g[k*n:(k+1)*n]; bb=b[k*n:(k+1)*n]
    d=sorted(x-y for x,y in zip(gg,bb))
    print(f"{label}: haproxy exec->exit gate {st.median(gg):.2f} bare {st.median(bb):.2f} median diff {d[len(d)//2]:+.3f} ms (n={len(d)})")
