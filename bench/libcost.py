#!/usr/bin/env python3
"""Resident memory of a running process, by the library its pages belong to.

    libcost.py PID [BINARY LINKMAP]

Shared libraries are read from /proc/PID/smaps (Rss and Anonymous per file). The
binary's own pages are attributed to the archive (or object) each byte was linked
from: its link map (ld -Map) gives every input section's address, /proc/PID/pagemap
which pages are present (needs root), so a statically linked library's cost is the
pages of its code and data that are resident, as for a shared one. Pages shared by
two archives' sections go to the one with more bytes in it. Prints KiB per library,
largest first, and the total (which equals the process's VmRSS).
"""
import collections
import re
import struct
import sys

PAGE = 4096
UNLOADED = ('.debug', '.comment', '.note.GNU-stack', '.gnu_debug', '.stab')


def link_ranges(path):
    """[(start, end, library)] of the input sections in a GNU ld map."""
    out = []
    pending = None
    sec = re.compile(r'^ (\.\S+)?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+)$')
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if re.match(r'^ \.\S+$', line):
            pending = line
            continue
        m = sec.match(line)
        name = m and (m.group(1) or (pending or '').strip())
        # Sections never loaded (debug information, comments) have addresses of
        # their own, from 0: they would land on the binary's first pages.
        if name and not name.startswith(UNLOADED):
            start, size = int(m.group(2), 16), int(m.group(3), 16)
            if size and start:
                lib = re.sub(r'\(.*', '', m.group(4)).rsplit('/', 1)[-1]
                # The linker's own tables (dynamic symbols, relocations) are listed
                # under the first input file, the C start file.
                if re.match(r'^S?crt[1in]\.o$', lib):
                    lib = '(start file, headers, dynamic tables)'
                out.append((start, start + size, lib))
        pending = None
    out.sort()
    return out


def main():
    pid = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else None
    ranges = link_ranges(sys.argv[3]) if len(sys.argv) > 3 else []
    kib = collections.Counter()
    anon = collections.Counter()
    maps = []
    name = None
    for line in open('/proc/%s/smaps' % pid):
        m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \S+\s*(.*)$', line)
        if m:
            name = m.group(4) or '[anon]'
            maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), name))
            continue
        if line.startswith('Rss:'):
            kib[name] += int(line.split()[1])
        elif line.startswith('Anonymous:'):
            anon[name] += int(line.split()[1])
    if binary and ranges:
        real = [n for (_, _, _, n) in maps if n.endswith('/' + binary.rsplit('/', 1)[-1])]
        if real:
            base = min(s - off for (s, _, off, n) in maps if n == real[0])
            present = set()
            with open('/proc/%s/pagemap' % pid, 'rb') as pm:
                for (s, e, _, n) in maps:
                    if n != real[0]:
                        continue
                    pm.seek(s // PAGE * 8)
                    entries = pm.read((e - s) // PAGE * 8)
                    for i in range((e - s) // PAGE):
                        (v,) = struct.unpack_from('<Q', entries, i * 8)
                        if not v >> 63 & 1:
                            continue
                        lo = s + i * PAGE - base
                        present.add(lo)
            # Attribute each present page to the library with most bytes in it.
            owner = {}
            j = 0
            for lo in sorted(present):
                hi = lo + PAGE
                while j < len(ranges) and ranges[j][1] <= lo:
                    j += 1
                k, share = j, collections.Counter()
                while k < len(ranges) and ranges[k][0] < hi:
                    a, b, lib = ranges[k]
                    if b > lo:  # (an earlier, longer section may end before this page)
                        share[lib] += min(b, hi) - max(a, lo)
                    k += 1
                owner[lo] = share.most_common(1)[0][0] if share else '(headers, relocations)'
            total_bin = kib.pop(real[0])
            counted = collections.Counter(owner.values())
            for lib, pages in counted.items():
                kib['static: ' + lib] += pages * PAGE // 1024
            rest = total_bin - sum(counted.values()) * PAGE // 1024
            if rest:
                kib['static: (other pages of the binary)'] += rest
    total = sum(kib.values())
    for lib, k in kib.most_common():
        if k:
            print('%8d KiB  %s%s' % (k, lib, '  (anon %d)' % anon[lib] if anon.get(lib) else ''))
    print('%8d KiB  total' % total)


if __name__ == '__main__':
    main()
