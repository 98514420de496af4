#!/usr/bin/env python3
"""CPU seconds by process name while a command runs.

    python3 bench/cpu-by-process.py COMMAND [ARGS...]

Reads /proc/<pid>/stat (utime + stime) of every process every 0.25 s while
COMMAND runs, keeps each process's last value (a process is its pid and
start time, so a reused pid counts apart), subtracts what a process had
already used when first seen if it was running before COMMAND started,
and prints the totals by name. A process that lives and dies between two
reads is missed, and one's last quarter second may be: a sampler, not an
accountant. Linux only.
"""
import collections
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def read_all():
    """{(pid, start): (name, cpu seconds)} of every process now."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        out[(pid, fields[19])] = (name, cpu)
    return out


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    before = read_all()
    started = time.time()
    child = subprocess.Popen(argv)
    last = {}
    while child.poll() is None:
        last.update(read_all())
        time.sleep(0.25)
    by_name = collections.Counter()
    for key, (name, cpu) in last.items():
        by_name[name] += cpu - before.get(key, (name, 0.0))[1]
    print(f"wall {time.time() - started:.1f} s, exit {child.returncode}; CPU s by process:")
    for name, cpu in by_name.most_common(15):
        if cpu >= 0.05:
            print(f"{cpu:8.1f}  {name}")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
