#!/usr/bin/env python3
"""An independent implementation of the verifiable draw (docs/drop-day.md,
*A draw anyone can verify*), written from the docs with Python's hashlib
and hmac only. Prints the golden vectors as JSON; shared/tests/golden.rs
checks the Rust implementation gives the same."""
import hashlib
import hmac
import json

def sha256(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()

def be64(n):
    return n.to_bytes(8, "big")

# The permutation: an 8-step Feistel network on the smallest even number of
# bits covering the round's size, round function HMAC-SHA-256(key,
# "queuegate-draw-v2" || round || size || step || half) (first 8 bytes,
# big-endian, masked to the half), cycle-walked into 0..size.
def within(key, rnd, size, index):
    if size <= 1:
        return 0
    bits = (size - 1).bit_length()
    half = (bits + 1) // 2
    mask = (1 << half) - 1
    x = index
    while True:
        left, right = x >> half, x & mask
        for step in range(8):
            m = hmac.new(key, b"queuegate-draw-v2" + be64(rnd) + be64(size) + bytes([step]) + be64(right), hashlib.sha256)
            f = int.from_bytes(m.digest()[:8], "big") & mask
            left, right = right, left ^ f
        x = (left << half) | right
        if x < size:
            return x

def places(key, rounds):
    out, start = [], 0
    for r, n in enumerate(rounds, 1):
        out += [start + within(key, r, n, i) for i in range(n)]
        start += n
    return out

def salt(salt_key, uid):
    return hmac.new(salt_key, b"queuegate-salt-v1" + uid.encode(), hashlib.sha256).digest()

def leaf(s, uid):
    return sha256(b"queuegate-leaf-v1", s, uid.encode())

def leaf_node(rnd, l):
    return sha256(b"\x00", be64(rnd), l)

def parent(a, b):
    return sha256(b"\x01", a, b)

def root(nodes):
    if not nodes:
        return bytes(32)
    level = list(nodes)
    while len(level) > 1:
        level = [parent(level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]

def proof(nodes, index):
    out, level, i = [], list(nodes), index
    while len(level) > 1:
        if (i ^ 1) < len(level):
            out.append(level[i ^ 1])
        level = [parent(level[j], level[j + 1]) if j + 1 < len(level) else level[j]
                 for j in range(0, len(level), 2)]
        i //= 2
    return out

def draw_key(seed, rt, beacon):
    return sha256(b"queuegate-draw-key-v1", seed, rt, beacon)

def main():
    seed = bytes(range(32))
    salt_key = bytes(range(32, 64))
    rounds = [5, 0, 3, 1]
    uids = ["v%02d" % i for i in range(sum(rounds))]
    leaves = [leaf(salt(salt_key, u), u) for u in uids]
    round_of = [r for r, n in enumerate(rounds, 1) for _ in range(n)]
    nodes = [leaf_node(r, l) for r, l in zip(round_of, leaves)]
    rt = root(nodes)
    key = draw_key(seed, rt, b"")
    key_beacon = draw_key(seed, rt, bytes.fromhex("ab" * 32))
    print(json.dumps({
        "commitment": sha256(seed).hex(),
        "salts": [salt(salt_key, u).hex() for u in uids[:2]],
        "leaves": [l.hex() for l in leaves],
        "root": rt.hex(),
        "proofs": {str(i): [p.hex() for p in proof(nodes, i)] for i in (0, 4, 8)},
        "drawKey": key.hex(),
        "drawKeyWithBeacon": key_beacon.hex(),
        "places": places(key, rounds),
        "permutation20": [within(seed, 1, 20, i) for i in range(20)],
        "permutation1M": [within(seed, 1, 1_000_000, i) for i in range(5)],
    }, indent=1))

main()
