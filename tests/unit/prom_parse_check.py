#!/usr/bin/python3
"""Checks a Prometheus text exposition (format 0.0.4) read from stdin.

It must decode as UTF-8 and parse with prometheus_client's own parser; histograms
must have cumulative buckets ending in +Inf equal to _count. Each argument NAME or
NAME:TYPE must be a family of the exposition (names as that parser reports them: a
counter "x_total" is family "x"). Prints a summary line and exits 0, or prints the
problem and exits 1.
"""
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def check_histogram(fam):
    series = {}
    for s in fam.samples:
        labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        entry = series.setdefault(labels, {"buckets": [], "count": None, "sum": None})
        if s.name.endswith("_bucket"):
            entry["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            entry["count"] = s.value
        elif s.name.endswith("_sum"):
            entry["sum"] = s.value
    for labels, entry in series.items():
        buckets = entry["buckets"]
        if not buckets or not math.isinf(buckets[-1][0]):
            raise ValueError(f"{fam.name}{labels}: no +Inf bucket")
        for (le1, v1), (le2, v2) in zip(buckets, buckets[1:]):
            if not le1 < le2 or v2 < v1:
                raise ValueError(f"{fam.name}{labels}: buckets not cumulative at le={le2}")
        if entry["count"] != buckets[-1][1] or entry["sum"] is None:
            raise ValueError(f"{fam.name}{labels}: _count/_sum do not match the buckets")


def main():
    try:
        text = sys.stdin.buffer.read().decode("utf-8")
        families = list(text_string_to_metric_families(text))
        for fam in families:
            if fam.type == "histogram":
                check_histogram(fam)
    except Exception as e:  # any parse problem fails the check
        print(f"prom_parse_check: invalid exposition: {e!r}", file=sys.stderr)
        return 1
    types = {f.name: f.type for f in families}
    for want in sys.argv[1:]:
        name, _, typ = want.partition(":")
        if name not in types:
            print(f"prom_parse_check: family {name} missing", file=sys.stderr)
            return 1
        if typ and types[name] != typ:
            print(f"prom_parse_check: family {name} is {types[name]}, want {typ}", file=sys.stderr)
            return 1
    print(f"prom_parse_check: {len(families)} families, "
          f"{sum(len(f.samples) for f in families)} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
