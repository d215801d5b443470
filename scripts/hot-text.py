#!/usr/bin/env python3
"""Write the hot-path linker script (src/hot-text.ld) from a link map and address traces.

Usage: scripts/hot-text.py MAP TRACE... [--relay RELAY_TRACE...] > src/hot-text.ld
       (scripts/hot-text.sh runs it)

MAP is the GNU ld map (-Wl,-Map) of the traced build/nri-qos; each TRACE lists the instruction
addresses one run executed (scripts/hot-trace.c), one hex address a line. Every input section
that holds a traced address becomes one line of an output section `.text.hot_path`, placed
before `.text` (INSERT BEFORE), in first-execution order, so that the code one invocation runs
sits in a few 64 KiB fault-around windows instead of being spread over the 2.5 MB of text.

Patterns: function sections (ours and libstdc++'s, -ffunction-sections) by section name;
objects of static archives without function sections (glibc, libgcc, protobuf) by
archive:member. glibc picks a string function's variant (sse2, avx2, evex, avx512) by CPU at
start-up; all variants of a traced family are listed, so other CPUs find theirs here too.

RELAY_TRACEs (after --relay) are the addresses the native relay process ran while it served
events (sampled with perf by scripts/hot-text.sh): their input sections not already on the hot
path become a second output section `.text.relay_path`, so that the relay's resident text (its
RSS: tests/nri_relay.sh holds it under 3 MiB) is a few windows too, whatever order the linker
happens to load the relay's objects in.
"""
import bisect
import re
import sys

VARIANT_FAMILY = re.compile(r"^((?:mem|str|stp|wcs|wmem|rawmem)[a-z]*)-")


def input_sections(map_path):
    """(addr, size, section, file) of every input section in the .text* output sections."""
    out = []
    lines = open(map_path, encoding="utf-8", errors="replace").read().split("\n")
    try:
        start = lines.index("Linker script and memory map")
    except ValueError:
        start = 0
    in_text = False
    i = start
    while i < len(lines):
        line = lines[i]
        if line and not line.startswith(" "):  # an output section (or other top-level line)
            in_text = line.split()[0].startswith(".text") if line.split() else False
            i += 1
            continue
        if in_text:
            m = re.match(r"^ (\.\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
            if not m:
                m1 = re.match(r"^ (\.\S+)\s*$", line)
                if m1 and i + 1 < len(lines):
                    m2 = re.match(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", lines[i + 1])
                    if m2:
                        out.append((int(m2.group(1), 16), int(m2.group(2), 16), m1.group(1), m2.group(3)))
                        i += 2
                        continue
            else:
                out.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1), m.group(4)))
        i += 1
    out = [s for s in out if s[1] > 0]
    out.sort()
    return out


def pattern(section, path):
    m = re.search(r"([^/]+\.a)\(([^)]+)\)$", path)
    generic = section in (".text", ".text.startup", ".text.unlikely", ".text.hot", ".text.exit") or \
        not re.match(r"^\.text\.[_A-Za-z]", section) or re.match(r"^\.text\.(sse|avx|evex|erms)", section)
    if not generic:
        return "*(%s)" % section
    if m:
        lib, member = m.group(1), m.group(2)
        lib = re.sub(r"-[0-9.]+\.a$", "*.a", lib)  # libm-2.36.a
        fam = VARIANT_FAMILY.match(member)
        if lib == "libc.a" and fam:
            return "*libc.a:%s*.o(.text .text.*)" % fam.group(1)
        return "*%s:%s(%s)" % (lib, member, section)
    return "*%s(%s)" % (path.split("/")[-1], section)


def ordered_sections(secs, starts, traces, skip=()):
    """Input sections holding a traced address, in first-execution order (those in `skip` left out)."""
    order = {}
    for trace in traces:
        for line in open(trace):
            line = line.strip()
            if not line:
                continue
            a = int(line, 16)
            k = bisect.bisect_right(starts, a) - 1
            if k >= 0 and secs[k][0] <= a < secs[k][0] + secs[k][1] and secs[k] not in order and secs[k] not in skip:
                order[secs[k]] = len(order)
    return sorted(order, key=order.get)


def patterns(sections, seen):
    pats, total = [], 0
    for s in sections:
        total += s[1]
        p = pattern(s[2], s[3])
        if p not in seen:
            seen.add(p)
            pats.append(p)
    return pats, total


def main():
    args = sys.argv[1:]
    relay = []
    if "--relay" in args:
        i = args.index("--relay")
        args, relay = args[:i], args[i + 1:]
    if len(args) < 2:
        sys.exit("usage: hot-text.py MAP TRACE... [--relay RELAY_TRACE...]")
    secs = input_sections(args[0])
    starts = [s[0] for s in secs]
    hot = ordered_sections(secs, starts, args[1:])
    seen = set()
    pats, total = patterns(hot, seen)
    rpats, rtotal = patterns(ordered_sections(secs, starts, relay, skip=set(hot)), seen) if relay else ([], 0)
    print("/* The hot path of `nri-qos invoke` (a v0.1 sandbox and container create with a compiled-policy")
    print("   cache hit) and of a native evaluation (`nri-eval` on the relay's RunPodSandbox,")
    print("   CreateContainer, StartContainer), placed before the rest of the text so that it sits in a")
    print("   few 64 KiB windows; a native spare maps it before its event (src/os/arena.hpp prefault).")
    if relay:
        print("   Then what the native relay process runs per event (.text.relay_path, sampled).")
    print("   Generated by scripts/hot-text.sh (%d input sections, %d KiB); do not edit. Stale entries" % (len(hot), total // 1024))
    print("   match nothing and are harmless; regenerate after larger changes to the hot path. */")
    print("SECTIONS\n{\n  .text.hot_path :\n  {")
    print("    PROVIDE_HIDDEN(__nriqos_hot_text_start = .);")
    for p in pats:
        print("    " + p)
    print("    PROVIDE_HIDDEN(__nriqos_hot_text_end = .);")
    print("  }")
    if rpats:
        print("  .text.relay_path :\n  {")
        for p in rpats:
            print("    " + p)
        print("  }")
    print("}\nINSERT BEFORE .text;")
    sys.stderr.write("hot-text.py: %d input sections, %d bytes, %d patterns; relay: %d bytes, %d patterns\n" %
                     (len(hot), total, len(pats), rtotal, len(rpats)))


if __name__ == "__main__":
    main()
