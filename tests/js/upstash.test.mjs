// Conformance of the `redis-rest` gateway with the official @upstash/redis
// client, in both of its modes: the defaults (auto-pipelining, base64
// responses, read-your-writes) and everything off. The test starts its own
// redis-server and gateway on loopback and stops both at the end, also when
// it fails.
//
// Run: node --test tests/js/upstash.test.mjs
// (gateway from target/debug/redis-rest, or $QG_REDIS_REST_BIN).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Redis } from "@upstash/redis";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const GATEWAY_BIN =
  process.env.QG_REDIS_REST_BIN ||
  path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, "target"), "debug", "redis-rest");
const LOOPBACK = "127.0.0.1";
const TOKEN = `qg-js-${process.pid}-${Date.now().toString(36)}`;
const TEST_TIMEOUT_MS = 30_000;

// Nothing may linger if the run is interrupted.
const children = new Set();
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

/** A port that was free a moment ago on loopback. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, LOOPBACK, () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Sends one RESP command to a raw Redis and resolves with the reply text. */
function rawRedis(port, ...words) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, LOOPBACK);
    let reply = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("raw redis command timed out"));
    }, 2_000);
    socket.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on("data", (chunk) => {
      reply += chunk.toString("utf8");
      // Good enough for status lines and one bulk string (INFO).
      const bulk = /^\$(\d+)\r\n/.exec(reply);
      if (!bulk ? reply.endsWith("\r\n") : Buffer.byteLength(reply) >= bulk[0].length + Number(bulk[1]) + 2) {
        clearTimeout(timer);
        socket.end();
        resolve(reply);
      }
    });
    const resp = `*${words.length}\r\n` + words.map((w) => `$${Buffer.byteLength(w)}\r\n${w}\r\n`).join("");
    socket.write(resp);
  });
}

async function waitFor(what, timeoutMs, probe) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch {
      // not ready yet
    }
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function track(child, name, log) {
  children.add(child);
  child.stdout.on("data", (d) => log.push(d.toString()));
  child.stderr.on("data", (d) => log.push(d.toString()));
  child.on("exit", () => children.delete(child));
  child.name = name;
  child.log = log;
  return child;
}

async function startRedis(dir) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const child = track(
      spawn("redis-server", ["--port", String(port), "--bind", LOOPBACK, "--save", "", "--appendonly", "no", "--dir", dir], {
        stdio: ["ignore", "pipe", "pipe"],
      }),
      "redis-server",
      [],
    );
    try {
      await waitFor("redis-server", 10_000, async () => {
        if (child.exitCode !== null) throw new Error("exited");
        return (await rawRedis(port, "PING")).startsWith("+PONG");
      });
      return { child, port };
    } catch {
      child.kill("SIGKILL"); // port clash or no start: try another port
    }
  }
  throw new Error("redis-server did not start on any of 5 free ports");
}

async function startGateway(redisPort) {
  assert.ok(existsSync(GATEWAY_BIN), `${GATEWAY_BIN} is not built: run \`cargo build --bins -p redis-rest\``);
  const log = [];
  const child = track(
    spawn(GATEWAY_BIN, ["--listen", `${LOOPBACK}:0`, "--redis-url", `redis://${LOOPBACK}:${redisPort}`], {
      env: { ...process.env, REDIS_REST_TOKEN: TOKEN, RUST_LOG: "redis_rest=info" },
      stdio: ["ignore", "pipe", "pipe"],
    }),
    "redis-rest",
    log,
  );
  const url = await waitFor("redis-rest", 20_000, async () => {
    if (child.exitCode !== null) throw new Error(`redis-rest exited:\n${log.join("")}`);
    const match = /redis-rest listening on (http:\/\/[\d.]+:\d+)\n/.exec(log.join(""));
    return match && match[1];
  });
  return { child, url };
}

function stop(child, signal) {
  if (!child || child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

let dir;
let redisServer;
let gateway;

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "qg-upstash-js-"));
  redisServer = await startRedis(dir);
  gateway = await startGateway(redisServer.port);
});

after(async () => {
  await stop(gateway?.child, "SIGTERM");
  await stop(redisServer?.child, "SIGKILL");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** INFO commandstats as { evalsha: {calls, failed_calls, ...}, ... }. */
async function commandStats() {
  const text = await rawRedis(redisServer.port, "INFO", "commandstats");
  const stats = {};
  for (const line of text.split("\r\n")) {
    const m = /^cmdstat_([^:]+):(.*)$/.exec(line);
    if (!m) continue;
    stats[m[1]] = Object.fromEntries(m[2].split(",").map((kv) => kv.split("=")).map(([k, v]) => [k, Number(v)]));
  }
  return stats;
}

const MODES = [
  { name: "defaults (auto-pipelining, base64, readYourWrites)", options: {} },
  {
    name: "plain (no auto-pipelining, no base64, no readYourWrites)",
    options: { enableAutoPipelining: false, responseEncoding: false, readYourWrites: false },
  },
];

for (const [index, mode] of MODES.entries()) {
  describe(mode.name, { timeout: TEST_TIMEOUT_MS }, () => {
    const p = `m${index}:`; // keys of one mode never meet the other's
    const client = () => new Redis({ url: gateway.url, token: TOKEN, retry: false, ...mode.options });

    test("strings: ascii, emoji, control and high code points, JSON values", async () => {
      const redis = client();
      const values = ["hello", "😀 naïve — ✓ 日本", "\u0000\u0001\u007f\u00ff\ufffd end", "OK", "x".repeat(100_000)];
      for (const [i, v] of values.entries()) {
        assert.equal(await redis.set(`${p}s${i}`, v), "OK");
      }
      const got = await Promise.all(values.map((_, i) => redis.get(`${p}s${i}`)));
      assert.deepEqual(got, values);
      await redis.set(`${p}json`, { a: 1, b: ["x", null] });
      assert.deepEqual(await redis.get(`${p}json`), { a: 1, b: ["x", null] });
      assert.deepEqual(await redis.mget(`${p}s0`, `${p}missing`, `${p}s1`), ["hello", null, values[1]]);
    });

    test("numbers and nil", async () => {
      const redis = client();
      assert.equal(await redis.get(`${p}missing`), null);
      assert.equal(await redis.incr(`${p}n`), 1);
      assert.equal(await redis.incrby(`${p}n`, 41), 42);
      assert.equal(await redis.get(`${p}n`), 42);
      assert.equal(await redis.incrbyfloat(`${p}f`, 1.5), 1.5);
      await redis.set(`${p}big`, "9007199254740993");
      // The client keeps a number's text when a double would change it.
      assert.equal(await redis.get(`${p}big`), "9007199254740993");
    });

    test("sorted sets: ZADD, ZRANK, ZPOPMIN", async () => {
      const redis = client();
      const key = `${p}z`;
      assert.equal(await redis.zadd(key, { score: 1, member: "a" }, { score: 2, member: "b" }, { score: 3, member: "😀" }), 3);
      assert.equal(await redis.zrank(key, "b"), 1);
      assert.equal(await redis.zrank(key, "nobody"), null);
      assert.deepEqual(await redis.zpopmin(key), ["a", 1]);
      assert.deepEqual(await redis.zpopmin(key, 2), ["b", 2, "😀", 3]);
      assert.equal(await redis.zcard(key), 0);
    });

    test("createScript().exec: EVALSHA, then EVAL on NOSCRIPT, then EVALSHA", async () => {
      const redis = client();
      await redis.scriptFlush();
      await rawRedis(redisServer.port, "CONFIG", "RESETSTAT");
      const script = redis.createScript("return {ARGV[1], redis.call('INCRBY', KEYS[1], ARGV[2])}");
      assert.deepEqual(await script.exec([`${p}sc`], ["😀 first", "2"]), ["😀 first", 2]);
      let stats = await commandStats();
      assert.equal(stats.eval?.calls, 1, JSON.stringify(stats));
      assert.ok((stats.evalsha?.calls ?? 0) + (stats.evalsha?.rejected_calls ?? 0) >= 1, JSON.stringify(stats));
      assert.deepEqual(await redis.scriptExists(script.sha1), [1]);
      assert.deepEqual(await script.exec([`${p}sc`], ["second", "3"]), ["second", 5]);
      stats = await commandStats();
      assert.equal(stats.eval?.calls, 1, "the second exec must not fall back to EVAL");
      await assert.rejects(redis.evalsha("0".repeat(40), [], []), /NOSCRIPT No matching script/);
    });

    test("multi(): atomic, results in order; a rejected transaction throws", async () => {
      const redis = client();
      const res = await redis.multi().set(`${p}m`, "1").incr(`${p}m`).get(`${p}m`).exec();
      assert.deepEqual(res, ["OK", 2, 2]);
      // `get()` without a key cannot be queued: Redis discards everything.
      await assert.rejects(redis.multi().set(`${p}m`, "changed").get().exec(), /EXECABORT/);
      assert.equal(await redis.get(`${p}m`), 2);
    });

    test("pipeline(): errors kept in place", async () => {
      const redis = client();
      const res = await redis.pipeline().set(`${p}p`, "x").incr(`${p}p`).get(`${p}p`).exec({ keepErrors: true });
      assert.equal(res.length, 3);
      assert.deepEqual(res[0], { result: "OK", error: undefined });
      assert.match(res[1].error, /^ERR value is not an integer/);
      assert.deepEqual(res[2], { result: "x", error: undefined });
      await assert.rejects(redis.pipeline().set(`${p}p`, "x").incr(`${p}p`).exec(), /Command 2 \[ incr \] failed/);
    });

    test("protocol details of this mode", async () => {
      const redis = client();
      await redis.set(`${p}rw`, "v");
      if (mode.options.readYourWrites === false) {
        assert.equal(redis.client.upstashSyncToken, "");
      } else {
        assert.notEqual(redis.client.upstashSyncToken, "", "the gateway sends upstash-sync-token");
      }
      if (mode.options.enableAutoPipelining === false) {
        assert.equal(redis.pipelineCounter, undefined);
      } else {
        const before = redis.pipelineCounter;
        const got = await Promise.all([redis.get(`${p}rw`), redis.get(`${p}rw`), redis.exists(`${p}rw`)]);
        assert.deepEqual(got, ["v", "v", 1]);
        assert.equal(redis.pipelineCounter - before, 1, "three calls in one tick are one /pipeline request");
      }
      await assert.rejects(redis.get(), /wrong number of arguments for 'get' command/);
    });
  });
}
