// Shared by the waiting-room page's tests (tests/js/page-*.test.mjs): the
// local stack each test starts (queuegate-dev on a free port), a crowd
// that enters through the proof-of-work check as browsers would, headless
// Chromium, the operator's commands and the page's spies. Each test file
// runs in its own process, so scripts/test runs them side by side.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
// Where cargo put the binaries: CARGO_TARGET_DIR when set (CI's cache).
export const debugDir = join(process.env.CARGO_TARGET_DIR || join(root, "target"), "debug");
export const devBin = process.env.QG_DEV_BIN || join(debugDir, "queuegate-dev");
export const schedulerBin = process.env.QG_SCHEDULER_BIN || join(debugDir, "queuegate-scheduler");
export const artifacts = join(root, "artifacts");
export const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";

// Starts the local stack (no crowd: the tests bring their own, below);
// resolves with its URL. `redis` resolves with the Redis URL it prints.
export function startStack(args = ["--admit-rate", "4", "--exit-after", "150"]) {
  const child = spawn(devBin, ["--port", "0", ...args],
    { stdio: ["ignore", "pipe", "pipe"], detached: true });
  let log = "", redisUrl;
  const url = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("stack did not start:\n" + log)), 90_000);
    child.stdout.on("data", (d) => {
      log += d;
      const m = /open (http:\/\/127\.0\.0\.1:\d+)\/queue/.exec(log);
      redisUrl = redisUrl || /redis: (redis:\/\/\S+)/.exec(log)?.[1];
      if (m && redisUrl) { clearTimeout(timer); resolve(m[1]); }
    });
    child.stderr.on("data", (d) => { log += d; });
    child.on("exit", (code) => reject(new Error(`stack exited with ${code}:\n${log}`)));
  });
  return { child, url, redis: () => redisUrl, log: () => log };
}

export function stop(child) {
  try { process.kill(-child.pid, "SIGTERM"); } catch { /* already gone */ }
}

// Runs one page test on its own stack: starts it with `args` (startStack's
// default when undefined), a browser and a scratch folder, calls
// body({ stack, base, browser, dir }), and whatever happens closes the
// browser, stops the stack and removes the folder. A failure carries the
// tail of the stack's log.
export async function withStack(args, body) {
  mkdirSync(artifacts, { recursive: true });
  const dir = mkdtempSync(join(tmpdir(), "qg-page-"));
  const stack = startStack(args);
  let browser;
  try {
    const base = await stack.url;
    browser = await launch();
    return await body({ stack, base, browser, dir });
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

// An X-Altcha solution for a fresh challenge, found as the page does (one
// SHA-256 per candidate number), in Node.
export async function solution(base) {
  const c = await (await fetch(`${base}/queue/challenge?queue=main`)).json();
  for (let n = 0; n <= c.maxnumber; n++) {
    if (createHash("sha256").update(c.salt + n).digest("hex") === c.challenge) {
      const { algorithm, challenge, salt, signature } = c;
      return Buffer.from(JSON.stringify({ algorithm, challenge, number: n, salt, signature })).toString("base64");
    }
  }
  throw new Error(`no solution for ${JSON.stringify(c)}`);
}

// The crowd ahead of our visitor: each takes a place through the challenge
// like a browser would, from its own address (wrangler dev passes a
// client-sent CF-Connecting-IP through), so the per-address budget of the
// defaults applies to each as it would in production. All solve first and
// then enter at once, so the line is long when our visitor arrives. They
// never poll: the scheduler admits them long before they would count as
// abandoned.
// Resolves with each visitor's cookie and first reply, in entry order.
export async function crowd(base, n) {
  const solutions = [];
  for (let i = 0; i < n; i++) solutions.push(await solution(base));
  return Promise.all(solutions.map(async (altcha, i) => {
    const resp = await fetch(`${base}/queue/enter?queue=main`, {
      method: "POST",
      headers: { "x-altcha": altcha, "cf-connecting-ip": `198.51.100.${i + 1}` },
    });
    assert.equal(resp.status, 200, `crowd visitor ${i + 1}: ${await resp.clone().text()}`);
    const cookie = resp.headers.getSetCookie().find((c) => c.startsWith("qg_visitor=")).split(";")[0];
    return { cookie, reply: await resp.json() };
  }));
}

// The page's "solved in" console line, with the rate it implies and the
// mean time at that difficulty (half the numbers tried).
export function solveReport(line, where) {
  const m = /solved in (\d+) ms \(number (\d+) of (\d+)\)/.exec(line);
  assert.ok(m, `no solve time in the console: ${line}`);
  const [ms, n, max] = m.slice(1).map(Number);
  const rate = n / Math.max(ms, 1);
  // A lucky small number mostly measures the Worker's start, not the rate.
  const mean = n >= max / 10 ? `, mean ≈ ${Math.round(max / 2 / rate)} ms at this difficulty` : "";
  return `headless Chromium, ${where}: solved in ${ms} ms (number ${n} of ${max}), `
    + `${Math.round(rate * 1000)} hashes/s${mean}`;
}

export const launch = () => chromium.launch({
  executablePath: CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

/** The page's console errors as they come, but those `ignore` matches (an expected 401, say). */
export function consoleErrors(page, ignore = null) {
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error" && !ignore?.test(m.text())) problems.push(m.text()); });
  return problems;
}
export const number = async (page, sel) => Number((await page.textContent(sel)).replace(/[^0-9]/g, ""));

// Operator commands (pause, resume) as an operator runs them: the scheduler
// binary with a config naming the stack's Redis.
export function operator(redisUrl, dir) {
  const config = join(dir, "operator.toml");
  writeFileSync(config, `[redis]\nurl = ${JSON.stringify(redisUrl)}\n\n[[queue]]\nid = "main"\n`);
  return (...args) => execFileSync(schedulerBin, ["--config", config, ...args], { encoding: "utf8", timeout: 15_000 });
}

// Spies the page cannot tell from the real APIs: notifications shown and
// permission asked (granted by the context), beeps started, every text the
// live region took, and the calls to the queue API, with their times.
export function spies() {
  const log = window.__qg = { asked: 0, shown: [], beeps: 0, said: [], calls: [] };
  // The page's calls to the queue API, timed where its timers run: a reply
  // is logged when its headers arrive, before the page reads it.
  const fetch0 = window.fetch;
  window.fetch = async (...args) => {
    const api = /\/queue\/(enter|position)\?/.exec(String(args[0]));
    if (!api) return fetch0(...args);
    // A drawn visitor's receipt is asked for apart from the polls.
    const receipt = /[?&]receipt=1/.test(String(args[0]));
    log.calls.push({ at: Date.now(), path: receipt ? "receipt" : api[1] });
    const resp = await fetch0(...args);
    const reply = { at: Date.now(), [receipt ? "receiptReply" : "reply"]: true };
    log.calls.push(reply);
    resp.clone().json().then((body) => Object.assign(reply, body), () => {});
    return resp;
  };
  const Real = window.Notification;
  const Spy = function Notification(title, options) {
    log.shown.push({ title, body: options && options.body });
    return new Real(title, options);
  };
  Object.defineProperty(Spy, "permission", { get: () => Real.permission });
  Spy.requestPermission = (...args) => { log.asked += 1; return Real.requestPermission(...args); };
  window.Notification = Spy;
  const start = OscillatorNode.prototype.start;
  OscillatorNode.prototype.start = function (...args) { log.beeps += 1; return start.apply(this, args); };
  document.addEventListener("DOMContentLoaded", () => {
    const status = document.getElementById("status");
    new MutationObserver(() => log.said.push([Date.now(), status.textContent]))
      .observe(status, { childList: true, characterData: true, subtree: true });
  });
}


export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export async function until(check, ms, what) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(50);
  }
}
// A Redis command against the stack's redis-server, as an operator would.
export const redisCli = (url, ...args) => execFileSync("redis-cli", ["-u", url, ...args], { encoding: "utf8", timeout: 10_000 }).trim();
