// The waiting-room page in a real browser (Debian's Chromium driven by
// playwright-core): a visitor passes the proof-of-work check, enters behind
// a synthetic crowd, sees their position and ETA fall, is admitted and
// completes an order through the protected route. Screenshots land in
// artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const devBin = process.env.QG_DEV_BIN || join(root, "target", "debug", "queuegate-dev");
const artifacts = join(root, "artifacts");
const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";

// Starts the local stack (no crowd: this test brings its own, below);
// resolves with its URL.
function startStack() {
  const child = spawn(devBin, ["--port", "0", "--admit-rate", "4", "--exit-after", "150"],
    { stdio: ["ignore", "pipe", "pipe"], detached: true });
  let log = "";
  const url = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("stack did not start:\n" + log)), 90_000);
    child.stdout.on("data", (d) => {
      log += d;
      const m = /open (http:\/\/127\.0\.0\.1:\d+)\/queue/.exec(log);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.stderr.on("data", (d) => { log += d; });
    child.on("exit", (code) => reject(new Error(`stack exited with ${code}:\n${log}`)));
  });
  return { child, url, log: () => log };
}

function stop(child) {
  try { process.kill(-child.pid, "SIGTERM"); } catch { /* already gone */ }
}

// An X-Altcha solution for a fresh challenge, found as the page does (one
// SHA-256 per candidate number), in Node.
async function solution(base) {
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
async function crowd(base, n) {
  const solutions = [];
  for (let i = 0; i < n; i++) solutions.push(await solution(base));
  await Promise.all(solutions.map(async (altcha, i) => {
    const resp = await fetch(`${base}/queue/enter?queue=main`, {
      method: "POST",
      headers: { "x-altcha": altcha, "cf-connecting-ip": `198.51.100.${i + 1}` },
    });
    assert.equal(resp.status, 200, `crowd visitor ${i + 1}: ${await resp.text()}`);
  }));
}

// The page's "solved in" console line, with the rate it implies and the
// mean time at that difficulty (half the numbers tried).
function solveReport(line, where) {
  const m = /solved in (\d+) ms \(number (\d+) of (\d+)\)/.exec(line);
  assert.ok(m, `no solve time in the console: ${line}`);
  const [ms, n, max] = m.slice(1).map(Number);
  const rate = n / Math.max(ms, 1);
  // A lucky small number mostly measures the Worker's start, not the rate.
  const mean = n >= max / 10 ? `, mean ≈ ${Math.round(max / 2 / rate)} ms at this difficulty` : "";
  return `headless Chromium, ${where}: solved in ${ms} ms (number ${n} of ${max}), `
    + `${Math.round(rate * 1000)} hashes/s${mean}`;
}

const number = async (page, sel) => Number((await page.textContent(sel)).replace(/[^0-9]/g, ""));

test("a visitor waits, is admitted and orders through the gate", { timeout: 170_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack();
  let browser;
  try {
    const base = await stack.url;
    // Without a solution, a new place is refused and nothing is written.
    const bare = await fetch(`${base}/queue/enter?queue=main`, { method: "POST" });
    assert.equal(bare.status, 403);
    assert.equal((await bare.json()).error, "challenge_required");
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage();
    const problems = [], workers = [];
    let solvedLine = "";
    page.on("console", (m) => {
      if (/solved in/.test(m.text())) solvedLine = m.text();
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("worker", (w) => workers.push(w.url()));
    let challenges = 0;
    page.on("request", (r) => { if (/\/queue\/challenge/.test(r.url())) challenges += 1; });
    // The first challenge is held back while we look at the checking state.
    let checking = "";
    await page.route("**/queue/challenge*", async (route) => {
      checking = await page.textContent("#status");
      await page.screenshot({ path: join(artifacts, "browser-checking.png") });
      await route.continue();
    }, { times: 1 });
    // The crowd takes its places just before our visitor arrives (the
    // browser is up by then: starting it takes seconds on a busy machine).
    await crowd(base, 40);
    await page.goto(base + "/queue");

    // The browser check: the page fetched a challenge, solved it in a Web
    // Worker with WebCrypto and entered with the solution.
    await page.waitForFunction(() => document.body.dataset.solveMs, null, { timeout: 60_000 });
    assert.equal(checking, "Checking your browser…");
    const solveMs = Number(await page.evaluate(() => document.body.dataset.solveMs));
    assert.ok(workers.some((u) => u.startsWith("blob:")), `a blob: Web Worker solved it, saw ${workers}`);
    console.log(solveReport(solvedLine, "Web Worker"));

    // Waiting: a position and an ETA, announced in a live region.
    await page.waitForSelector("#figures:not([hidden])", { timeout: 20_000 });
    const first = await number(page, "#position");
    assert.ok(first > 1, `behind the crowd, got position ${first}`);
    assert.match(await page.textContent("#eta"), /\d+ (s|min)/);
    assert.equal(await page.getAttribute("#status", "aria-live"), "polite");
    assert.ok(await page.getAttribute("#progress", "aria-label"));
    await page.screenshot({ path: join(artifacts, "browser-waiting.png") });

    // A visitor who holds a place is never asked again: a reload keeps it.
    await page.reload();
    await page.waitForSelector("#figures:not([hidden])", { timeout: 20_000 });
    assert.equal(challenges, 1, "one challenge for the first entry only");
    assert.equal(await page.evaluate(() => document.body.dataset.solveMs), undefined);

    // The position falls as the scheduler admits the people ahead.
    await page.waitForFunction((p) => {
      const el = document.querySelector("#position");
      return el && Number(el.textContent.replace(/[^0-9]/g, "")) < p;
    }, first, { timeout: 30_000, polling: 200 });
    assert.ok(await number(page, "#progress") >= 0);

    // Admitted: the continue button becomes usable.
    await page.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 60_000 });
    await page.screenshot({ path: join(artifacts, "browser-admitted.png") });
    await page.click("#continue");
    await page.waitForURL(/\/checkout$/);

    // The order goes through the protected route with the token cookie.
    await page.click("#order");
    await page.waitForFunction(() => /Order confirmed/.test(document.querySelector("#result").textContent),
      null, { timeout: 15_000 });
    await page.screenshot({ path: join(artifacts, "browser-ordered.png") });

    // The visitor's order is recorded. (Opening /queue again would enter
    // anew: an ordered visitor holds no place, so that costs a new check.)
    const after = await page.evaluate(async () =>
      (await fetch("/queue/position?queue=main", { headers: { accept: "application/json" } })).json());
    assert.equal(after.state, "ordered");

    // Without Web Workers the page solves on the main thread, in chunks.
    const plain = await browser.newContext();
    await plain.addInitScript(() => { delete window.Worker; });
    const fallback = await plain.newPage();
    let fallbackLine = "";
    fallback.on("console", (m) => { if (/solved in/.test(m.text())) fallbackLine = m.text(); });
    await fallback.goto(base + "/queue");
    await fallback.waitForSelector("#figures:not([hidden]), #continue:not([hidden])", { timeout: 60_000 });
    console.log(solveReport(fallbackLine, "main thread"));
    await plain.close();

    // Solutions refused again and again: three tries, then plain words and
    // a button; a too_many_entries refusal is waited out, and said so.
    const stubborn = await browser.newContext();
    const refused = await stubborn.newPage();
    let tries = 0;
    await refused.route("**/queue/challenge*", (route) => { tries += 1; return route.continue(); });
    await refused.route("**/queue/enter*", (route) => route.fulfill({
      status: 403, contentType: "application/json", body: '{"error":"challenge_invalid"}' }));
    await refused.goto(base + "/queue");
    await refused.waitForSelector("#rejoin:not([hidden])", { timeout: 60_000 });
    assert.equal(await refused.textContent("#status"), "We could not check your browser.");
    assert.equal(await refused.textContent("#rejoin"), "Try again");
    assert.equal(tries, 3);
    await refused.unroute("**/queue/enter*");
    await refused.route("**/queue/enter*", (route) => route.fulfill({ status: 429, contentType: "application/json",
      headers: { "retry-after": "30" }, body: '{"error":"too_many_entries"}' }), { times: 1 });
    await refused.click("#rejoin");
    await refused.waitForFunction(() => /try again in 30 s/.test(document.querySelector("#status").textContent));
    await stubborn.close();
    assert.deepEqual(problems.filter((p) => /Content Security Policy/.test(p)), [], "no CSP violations");
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});
