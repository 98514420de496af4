#!/usr/bin/env python3
"""Where a wasm module's bytes are: its sections, then its functions' code
by size, named from the module's name section (build with names kept:
`CARGO_PROFILE_RELEASE_STRIP=false scripts/build-worker`, whose wasm-opt
then runs with `-g`; see BENCHMARKS.md, "Worker wasm size").

    bench/wasm-sizes.py worker/build/index_bg.wasm [TOP] [--crates]

--crates sums the functions by the crate their demangled name starts with
(`queuegate_worker`, `serde_json`, `core`, ...), a rough split: generic
code is named after the crate that defines it, not the one that uses it.
"""
import re
import sys
from collections import Counter


def leb(data, i):
    """An unsigned LEB128 at data[i]: (value, next index)."""
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def sections(data):
    assert data[:4] == b"\0asm", "not a wasm module"
    i = 8
    while i < len(data):
        sid = data[i]
        size, j = leb(data, i + 1)
        yield sid, data[j : j + size]
        i = j + size


def imported_functions(payload):
    count, i = leb(payload, 0)
    funcs = 0
    for _ in range(count):
        for _ in range(2):  # module and field names
            n, i = leb(payload, i)
            i += n
        kind = payload[i]
        i += 1
        if kind == 0:  # function: a type index
            _, i = leb(payload, i)
            funcs += 1
        elif kind == 1:  # table: reftype, limits
            i += 1
            flags, i = leb(payload, i)
            _, i = leb(payload, i)
            if flags & 1:
                _, i = leb(payload, i)
        elif kind == 2:  # memory: limits
            flags, i = leb(payload, i)
            _, i = leb(payload, i)
            if flags & 1:
                _, i = leb(payload, i)
        elif kind == 3:  # global: valtype, mutability
            i += 2
        else:
            _, i = leb(payload, i)
    return funcs


def function_names(payload):
    n, i = leb(payload, 0)
    if payload[i : i + n] != b"name":
        return None
    i += n
    names = {}
    while i < len(payload):
        sub = payload[i]
        size, i = leb(payload, i + 1)
        end = i + size
        if sub == 1:
            count, j = leb(payload, i)
            for _ in range(count):
                idx, j = leb(payload, j)
                ln, j = leb(payload, j)
                names[idx] = payload[j : j + ln].decode("utf-8", "replace")
                j += ln
        i = end
    return names


def crate_of(name):
    name = re.sub(r"^_ZN|^<|^&", "", name)
    m = re.match(r"(?:dyn )?(?:mut )?([A-Za-z_][A-Za-z0-9_]*)", name)
    return m.group(1) if m else "?"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    by_crate = "--crates" in sys.argv
    path = args[0]
    top = int(args[1]) if len(args) > 1 else 40
    data = open(path, "rb").read()
    names, bodies, imports = {}, [], 0
    section_names = {0: "custom", 1: "type", 2: "import", 3: "function", 4: "table", 5: "memory",
                     6: "global", 7: "export", 8: "start", 9: "element", 10: "code", 11: "data",
                     12: "datacount"}
    print(f"{path}: {len(data):,} bytes")
    for sid, payload in sections(data):
        label = section_names.get(sid, str(sid))
        if sid == 0:
            n, i = leb(payload, 0)
            label = "custom " + payload[i : i + n].decode("utf-8", "replace")
            names = function_names(payload) or names
        print(f"  section {label:<24} {len(payload):>9,}")
        if sid == 2:
            imports = imported_functions(payload)
        if sid == 10:
            count, i = leb(payload, 0)
            for k in range(count):
                size, j = leb(payload, i)
                bodies.append((size, imports + k))
                i = j + size
    if not names:
        print("(no name section: functions are shown by index)")
    if by_crate:
        sums = Counter()
        for size, idx in bodies:
            sums[crate_of(names.get(idx, "?"))] += size
        for crate, size in sums.most_common(top):
            print(f"{size:>9,}  {crate}")
        return
    for size, idx in sorted(bodies, reverse=True)[:top]:
        print(f"{size:>9,}  {names.get(idx, f'func[{idx}]')[:150]}")


if __name__ == "__main__":
    main()
