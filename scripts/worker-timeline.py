#!/usr/bin/env python3
"""Timeline of a running Lanyard's threads, to tell a stalled worker from a
busy one: every 10 ms, each `lanyard` process's worker0 (and any thread
that used more than 2 ms) with its CPU time, run-queue wait, state and
wchan over the interval, from /proc/PID/task/TID/{schedstat,stat,wchan}.

Usage: worker-timeline.py SECONDS OUTFILE   (docs/performance.md, issue 13)"""
import os, sys, time

if len(sys.argv) != 3:
    sys.exit(__doc__)
end = time.time() + float(sys.argv[1])
out = open(sys.argv[2], 'w')
prev = {}
t0 = time.monotonic()
while time.time() < end:
    now = time.monotonic()
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            if open(f'/proc/{pid}/comm').read().strip() != 'lanyard': continue
            for t in os.listdir(f'/proc/{pid}/task'):
                comm = open(f'/proc/{pid}/task/{t}/comm').read().strip()
                cpu, wait, n = map(int, open(f'/proc/{pid}/task/{t}/schedstat').read().split())
                k = (pid, t)
                if k in prev:
                    p = prev[k]
                    dcpu = (cpu - p[1]) / 1e6
                    if comm == 'worker0' or dcpu > 2:
                        st = open(f'/proc/{pid}/task/{t}/stat').read().split(') ')[1].split()[0]
                        wc = open(f'/proc/{pid}/task/{t}/wchan').read().strip()
                        out.write(f"{now-t0:.3f} {pid} {comm} dt={(now-p[0])*1000:.0f} cpu={dcpu:.1f} wait={(wait-p[2])/1e6:.1f} {st} {wc}\n")
                prev[k] = (now, cpu, wait)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass
    time.sleep(0.01)
