#!/usr/bin/env python3
"""Wait until COUNT Foos in a namespace are ready, by watching them (no polling of
the whole list), and print how long it took since a given start time.

  wait_ready.py NAMESPACE COUNT START_EPOCH TIMEOUT_SECONDS [--condition]

"Ready" is measured two ways, both printed as seconds since START_EPOCH:
  avail=S  status.availableReplicas == spec.replicas on COUNT Foos. Both the C daemon
           and the Go original maintain availableReplicas, so this is the fair figure.
  cond=S   condition Ready=True on COUNT Foos (only with --condition: the Go original
           sets no conditions).
Exit status 0 when all figures were reached, 1 on timeout (the counts reached so far
are printed instead). Progress goes to stderr every 15 s.

Uses `kubectl get -w`: it lists once, then streams each change; if the server ends
the watch, it is started again (the new list carries the current state).
"""
import subprocess
import sys
import threading
import time

TEMPLATE = (
    '{.metadata.name}{" "}{.spec.replicas}{" "}{.status.availableReplicas}{" "}'
    '{.status.conditions[?(@.type=="Ready")].status}{"\\n"}'
)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    ns, count, start, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    want_cond = "--condition" in sys.argv[5:]
    deadline = start + timeout
    avail_ok, cond_ok = set(), set()
    t_avail = t_cond = None
    last_progress = time.time()

    def done():
        return t_avail is not None and (t_cond is not None or not want_cond)

    while not done() and time.time() < deadline:
        proc = subprocess.Popen(
            ["kubectl", "get", "foos.samplecontroller.k8s.io", "-n", ns, "-w",
             "--request-timeout=0", "-o", "jsonpath=" + TEMPLATE],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        # A quiet watch blocks the read below: end it at the deadline.
        timer = threading.Timer(max(0.0, deadline - time.time()), proc.kill)
        timer.start()
        try:
            for line in proc.stdout:
                parts = line.rstrip("\n").split(" ")
                if len(parts) < 4 or not parts[0]:
                    continue
                name, replicas, avail, ready = parts[0], parts[1], parts[2], parts[3]
                if replicas and avail == replicas:
                    avail_ok.add(name)
                else:
                    avail_ok.discard(name)
                if ready == "True":
                    cond_ok.add(name)
                else:
                    cond_ok.discard(name)
                now = time.time()
                if t_avail is None and len(avail_ok) >= count:
                    t_avail = now - start
                if want_cond and t_cond is None and len(cond_ok) >= count:
                    t_cond = now - start
                if done() or now >= deadline:
                    break
                if now - last_progress >= 15:
                    last_progress = now
                    print("    ... %.0fs: %d/%d available%s" % (
                        now - start, len(avail_ok), count,
                        (", %d Ready=True" % len(cond_ok)) if want_cond else ""),
                        file=sys.stderr, flush=True)
        finally:
            timer.cancel()
            proc.kill()
            proc.wait()
        if not done():
            time.sleep(0.5)

    out = []
    out.append("avail=%.1f" % t_avail if t_avail is not None else "avail=timeout(%d/%d)" % (len(avail_ok), count))
    if want_cond:
        out.append("cond=%.1f" % t_cond if t_cond is not None else "cond=timeout(%d/%d)" % (len(cond_ok), count))
    print(" ".join(out))
    return 0 if done() else 1


if __name__ == "__main__":
    sys.exit(main())
