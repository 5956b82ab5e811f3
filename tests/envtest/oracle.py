#!/usr/bin/env python3
"""The sharding overlap oracle: merges the --reconcile-log lines of every replica
("<start_ns> <end_ns> <identity> <controller> <key>", wall clock, one machine) and
fails on any two intervals of the same controller and key, from different replicas,
that overlap. Prints the counts; exit 1 with the first overlaps when there are any.

usage: oracle.py LOG...
"""
import sys
from collections import defaultdict


def main(paths):
    runs = defaultdict(list)
    n = bad_lines = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) != 5:
                    bad_lines += 1
                    continue
                start, end = int(parts[0]), int(parts[1])
                runs[(parts[3], parts[4])].append((start, end, parts[2]))
                n += 1
    overlaps = []
    replicas = set()
    for key, iv in runs.items():
        iv.sort()
        # Against the latest-ending run so far: a run starting before it ended
        # overlaps it (same replica: the workqueue's guarantee, also checked).
        last_end, last_who = None, None
        for start, end, who in iv:
            replicas.add(who)
            if last_end is not None and start < last_end:
                overlaps.append((key, who, last_who, start, last_end))
            if last_end is None or end > last_end:
                last_end, last_who = end, who
    print(f"oracle: {n} reconciles of {len(runs)} keys by {len(replicas)} replicas; "
          f"{len(overlaps)} overlaps; {bad_lines} malformed lines")
    for key, a, b, start, end in overlaps[:10]:
        print(f"  overlap: {key[0]} {key[1]}: {a} started at {start}, "
              f"{(end - start) / 1e6:.3f} ms before {b}'s run ended")
    return 1 if overlaps or bad_lines or n == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
