// The waiting-room page in a real browser (Debian's Chromium driven by
// playwright-core): a visitor passes the proof-of-work check, enters behind
// a synthetic crowd, sees their position and ETA fall, is admitted and
// completes an order through the protected route; and on drop day a
// visitor who comes before the opening sees the countdown, gets a drawn
// place and is notified of their turn, and a newcomer to the empty line
// is admitted on entry; a challenge gone stale while it was solved (the
// line grew past a difficulty level) is solved again without an error; and
// far from the head the place shown is the edge's estimate ("about N");
// a person who opens a protected page is sent to the room and back; and
// with Turnstile on (a local stand-in) the page renders the widget, says
// why a check failed and joins once it passes; the operator's notice
// shows as text within a poll, and a revoked visitor is told so; and a
// Korean browser gets the page in Korean; and with a drop's stock, the
// chance that stock remains and the sold-out view, in English and German.
// Screenshots land in artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
// Where cargo put the binaries: CARGO_TARGET_DIR when set (CI's cache).
const debugDir = join(process.env.CARGO_TARGET_DIR || join(root, "target"), "debug");
const devBin = process.env.QG_DEV_BIN || join(debugDir, "queuegate-dev");
const schedulerBin = process.env.QG_SCHEDULER_BIN || join(debugDir, "queuegate-scheduler");
const artifacts = join(root, "artifacts");
const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";

// Starts the local stack (no crowd: the tests bring their own, below);
// resolves with its URL. `redis` resolves with the Redis URL it prints.
function startStack(args = ["--admit-rate", "4", "--exit-after", "150"]) {
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
// Resolves with each visitor's cookie and first reply, in entry order.
async function crowd(base, n) {
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

const launch = () => chromium.launch({
  executablePath: CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

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
    browser = await launch();
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
      checking = await page.textContent("#heading");
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
    // The heading says what happens, not "You are in the queue" (not yet).
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

// Operator commands (pause, resume) as an operator runs them: the scheduler
// binary with a config naming the stack's Redis.
function operator(redisUrl, dir) {
  const config = join(dir, "operator.toml");
  writeFileSync(config, `[redis]\nurl = ${JSON.stringify(redisUrl)}\n\n[[queue]]\nid = "main"\n`);
  return (...args) => execFileSync(schedulerBin, ["--config", config, ...args], { encoding: "utf8", timeout: 15_000 });
}

// Spies the page cannot tell from the real APIs: notifications shown and
// permission asked (granted by the context), beeps started, every text the
// live region took, and the calls to the queue API, with their times.
function spies() {
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

// The line grows while the page solves: the solution's level is below the
// one in force when it arrives (403 challenge_stale), and the page fetches a
// harder challenge and solves it again, showing no error.
test("a challenge gone stale while solving is solved again without an error", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  // A line of 8 whose challenge counts from 8: from 4 the level is 1
  // (maxnumber x2).
  const stack = startStack(["--max-waiting", "8", "--challenge-crowd", "8", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-browser-"));
  let browser;
  try {
    const base = await stack.url;
    // Paused: nobody is admitted or passes straight through, so the crowd
    // below stays in line.
    assert.match(operator(stack.redis(), dir)("pause", "main"), /paused/);
    browser = await launch();
    const context = await browser.newContext();
    await context.addInitScript(spies);
    const page = await context.newPage();
    const problems = [], issued = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    page.on("response", async (r) => {
      if (/\/queue\/challenge/.test(r.url())) issued.push(await r.json());
    });
    // The page's solution (fetched at level 0, the line empty) is held
    // while four others take places: the line is half full when it lands.
    let held = false;
    await page.route("**/queue/enter*", async (route) => {
      if (!held && route.request().headers()["x-altcha"]) {
        held = true;
        await crowd(base, 4);
      }
      return route.continue();
    });
    await page.goto(base + "/queue");
    await page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
    assert.equal(await number(page, "#position"), 5);
    assert.ok(held, "the first solution was held back");

    // Two challenges: level 0, then level 1 at twice the work.
    assert.deepEqual(issued.map((c) => [/&level=(\d)&/.exec(c.salt)?.[1], c.maxnumber]), [["0", 5000], ["1", 10000]]);
    const { calls, said } = await page.evaluate(() => window.__qg);
    const refusals = calls.filter((c) => c.error).map((c) => c.error);
    assert.deepEqual(refusals, ["challenge_required", "challenge_stale"]);
    // Nothing but the check and the wait was said: no error, no retry button.
    const texts = said.map(([, t]) => t);
    for (const t of texts) {
      assert.ok(!/could not|trouble|try again|full|not taking/i.test(t), `said ${JSON.stringify(t)}: ${texts.join(" | ")}`);
    }
    assert.ok(await page.isHidden("#rejoin"));
    assert.equal(await page.textContent("#heading"), "You are in the queue");
    assert.deepEqual(problems.filter((p) => /Content Security Policy/.test(p)), [], "no CSP violations");
    await page.screenshot({ path: join(artifacts, "browser-stale.png") });

    // Stale three times in a row (as if the line rose again each time): a
    // stale solution is no failed try, so the page still gets its place
    // where three refusals of another kind end in "could not check".
    const again = await browser.newContext();
    await again.addInitScript(spies);
    const second = await again.newPage();
    let stubbed = 0;
    await second.route("**/queue/enter*", (route) => {
      if (route.request().headers()["x-altcha"] && stubbed < 3) {
        stubbed += 1;
        return route.fulfill({ status: 403, contentType: "application/json",
          body: '{"error":"challenge_stale","message":"solve a new one"}' });
      }
      return route.continue();
    });
    await second.goto(base + "/queue");
    await second.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
    assert.equal(stubbed, 3);
    assert.equal(await number(second, "#position"), 6);
    assert.ok(await second.isHidden("#rejoin"));
    const secondSaid = (await second.evaluate(() => window.__qg.said)).map(([, t]) => t);
    assert.ok(!secondSaid.some((t) => /could not|trouble/i.test(t)), secondSaid.join(" | "));
    await again.close();
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});

const OPENS_IN = 50;
const CROWD = 12;

test("drop day: countdown, a drawn place at the opening, then the turn with a notification", { timeout: 170_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  // Admission at 1/s: the last of 13 is admitted 13 s after the resume.
  const stack = startStack(["--admit-rate", "1", "--opens-in", String(OPENS_IN), "--exit-after", "160"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-browser-"));
  let browser;
  try {
    const base = await stack.url;
    const admin = operator(stack.redis(), dir);
    browser = await launch();
    // Visitors who come before the opening hold no place yet: only a draw.
    const early = await crowd(base, CROWD);
    const opensAt = early[0].reply.opensAt;
    for (const { reply } of early) {
      assert.equal(reply.state, "pre_queue", JSON.stringify(reply));
      assert.equal(reply.opensAt, opensAt);
      assert.equal(reply.position, undefined);
    }

    const context = await browser.newContext();
    await context.grantPermissions(["notifications"], { origin: base });
    await context.addInitScript(spies);
    const page = await context.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    let challenges = 0;
    page.on("request", (r) => { if (/\/queue\/challenge/.test(r.url())) challenges += 1; });
    await page.goto(base + "/queue");

    // The pre-queue: a countdown in the visitor's local time that ticks
    // every second, the draw explained, the opening in the tab's title.
    await page.waitForSelector("#countdown:not([hidden])", { timeout: 30_000 });
    const left = opensAt - Date.now();
    assert.ok(left > 8_000, `the page reached the pre-queue ${left} ms before the opening: raise OPENS_IN`);
    const hm = await page.evaluate((t) =>
      new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" }).format(t), opensAt);
    const countdown = await page.textContent("#countdown");
    assert.match(countdown, /^Opens at .+ \(in \d+:\d\d\)$/);
    assert.ok(countdown.includes(hm), `${countdown} names ${hm}`);
    await page.waitForFunction((c) => document.querySelector("#countdown").textContent !== c, countdown,
      { timeout: 3_000 });
    assert.equal(await page.textContent("#heading"), "The queue opens soon");
    assert.match(await page.textContent("#note"), /drawn at the opening/);
    assert.match(await page.textContent("#status"), /opens at .+ less than a minute|opens at .+ in about \d+ min/);
    const baseTitle = "Demo shop — waiting room";
    assert.equal(await page.title(), `(opens ${hm}) ${baseTitle}`);
    // Notifications: offered, but asked for only on a click.
    assert.equal(await page.textContent("#notify"), "Notify me when it's my turn");
    assert.equal(await page.evaluate(() => window.__qg.asked), 0, "no permission prompt on load");
    await page.screenshot({ path: join(artifacts, "browser-prequeue.png") });

    // A refresh keeps the draw: no new check, the same opening.
    await page.reload();
    await page.waitForSelector("#countdown:not([hidden])", { timeout: 20_000 });
    assert.equal(challenges, 1, "one challenge for the first entry only");
    assert.equal(await page.evaluate(() => window.__qg.asked), 0, "no permission prompt on reload");
    await page.click("#notify");
    await page.waitForSelector("#notify", { state: "hidden" });
    assert.equal(await page.evaluate(() => window.__qg.asked), 1, "asked once, on the click");
    assert.equal(await page.textContent("#notify-text"), "We will notify you when it is your turn.");

    // The operator pauses admission before the opening, so the places are
    // drawn but nobody is admitted yet: the test sees every place.
    assert.match(admin("pause", "main"), /paused/);
    assert.ok(Date.now() < opensAt - 1_000, "paused before the opening");

    // After the opening: a place, in the title too; no estimate while paused.
    await page.waitForSelector("#figures:not([hidden])", { timeout: opensAt - Date.now() + 30_000 });
    const place = await number(page, "#position");
    assert.ok(place >= 1 && place <= CROWD + 1, `drawn place ${place}`);
    assert.equal(await page.title(), `(${place}) ${baseTitle}`);
    assert.ok(await page.isHidden("#eta-at"), "no admission time while paused");
    await page.screenshot({ path: join(artifacts, "browser-drawn.png") });

    // A drawn visitor is offered the proof of its place (issue #41): a
    // download whose receipt names the place shown, its leaf in the record.
    await page.waitForSelector("#receipt-box:not([hidden])", { timeout: 70_000 });
    assert.equal(await page.textContent("#receipt"), "Proof of your place (download)");
    assert.equal(await page.getAttribute("#receipt", "download"), "proof-of-place.json");
    const href = await page.getAttribute("#receipt", "href");
    const receipt = JSON.parse(decodeURIComponent(href.replace(/^data:application\/json,/, "")));
    assert.equal(receipt.place, place, JSON.stringify(receipt));
    const record = await (await fetch(`${base}/queue/draw?queue=main`)).json();
    assert.equal(receipt.root, record.root, JSON.stringify(record));

    // The draw: every early visitor holds one of the places 1..13, in an
    // order that is not the order of arrival.
    const places = await Promise.all(early.map(async ({ cookie }) => {
      const r = await (await fetch(`${base}/queue/position?queue=main`, { headers: { cookie } })).json();
      assert.equal(r.state, "waiting", JSON.stringify(r));
      return r.position;
    }));
    assert.deepEqual([...places, place].sort((a, b) => a - b), Array.from({ length: CROWD + 1 }, (_, i) => i + 1));
    assert.ok(places.some((p, i) => i > 0 && p < places[i - 1]), `drawn, not first come: ${places}`);

    // Since the reload the page polled only when the server said, never
    // sooner: no poll of its own at the opening (the server spreads those).
    const calls = await page.evaluate(() => window.__qg.calls);
    const polls = calls.map((c, i) => [c, i]).filter(([c]) => c.path === "position");
    assert.ok(polls.length >= 1 && polls.some(([c]) => c.at > opensAt), JSON.stringify(calls));
    for (const [poll, i] of polls) {
      const prev = calls.slice(0, i).findLast((c) => c.reply);
      assert.ok(poll.at - prev.at >= prev.retryAfterMs - 20,
        `polled ${poll.at - prev.at} ms after a reply that asked for ${prev.retryAfterMs} ms`);
    }
    // The countdown ticked every second, but the live region heard of it
    // at most once a minute.
    const said = await page.evaluate(() => window.__qg.said.map(([, text]) => text));
    assert.ok(said.filter((t) => /opens at/.test(t)).length <= 1 + Math.ceil(OPENS_IN / 60), said.join(" | "));

    admin("resume", "main");
    // The visitor drawn last (a crowd visitor, seen through a page of their
    // own): the estimate and the local time of admission, then the line
    // moves.
    const last = Math.max(...places);
    const cookie = early[places.indexOf(last)].cookie, cut = cookie.indexOf("=");
    const other = await browser.newContext();
    await other.addCookies([{ name: cookie.slice(0, cut), value: cookie.slice(cut + 1), url: base }]);
    const behind = await other.newPage();
    await behind.goto(base + "/queue");
    await behind.waitForSelector("#eta-at:not([hidden])", { timeout: 20_000 });
    const [title, at] = await behind.evaluate(() => [document.title, document.querySelector("#position").textContent]);
    // Admission has resumed (1/s): a few may have gone in meanwhile.
    assert.ok(Number(at) <= last && Number(at) > last - 8, `place ${at}, drawn ${last}`);
    assert.equal(title, `(${at}) ${baseTitle}`);
    assert.match(await behind.textContent("#eta-at"), /^You will be admitted at about \d{1,2}:\d\d( [AP]M)?\.$/);
    assert.match(await behind.textContent("#eta"), /\d+ (s|min)/);
    await behind.screenshot({ path: join(artifacts, "browser-drawn-eta.png") });
    await behind.waitForFunction((p) => Number(document.querySelector("#position").textContent) < p, Number(at),
      { timeout: 30_000, polling: 200 });
    await other.close();

    // The turn: the title, the notification and the beep, once.
    await page.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 60_000 });
    assert.equal(await page.title(), `(your turn) ${baseTitle}`);
    assert.equal(await page.textContent("#heading"), "It is your turn");
    const { shown, beeps } = await page.evaluate(() => window.__qg);
    assert.deepEqual(shown, [{ title: baseTitle, body: "It is your turn! Come back to continue." }]);
    assert.ok(beeps >= 1, "a beep");
    await page.screenshot({ path: join(artifacts, "browser-turn.png") });

    // Once the line is empty, a newcomer is admitted on entry (idle
    // passthrough): the page goes straight to the turn, with no notification.
    for (let t = Date.now(); ; await new Promise((r) => setTimeout(r, 500))) {
      const r = await (await fetch(`${base}/queue/position?queue=main`, { headers: { cookie } })).json();
      if (r.state !== "waiting") break;
      assert.ok(Date.now() - t < 30_000, `the last drawn visitor still waits: ${JSON.stringify(r)}`);
    }
    const late = await browser.newContext();
    await late.grantPermissions(["notifications"], { origin: base });
    await late.addInitScript(spies);
    const newcomer = await late.newPage();
    await newcomer.goto(base + "/queue");
    await newcomer.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 30_000 });
    assert.equal(await newcomer.title(), `(your turn) ${baseTitle}`);
    const lateLog = await newcomer.evaluate(() => window.__qg);
    assert.deepEqual(lateLog.calls.filter((c) => c.state).map((c) => c.state), ["admitted"]);
    assert.deepEqual(lateLog.shown, []);
    await late.close();
    assert.deepEqual(problems.filter((p) => /Content Security Policy/.test(p)), [], "no CSP violations");
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});

test("far from the head the page shows an approximate place, answered at the edge", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  // At 0.05 admissions/s the near zone (180 s) is 9 visitors: behind a
  // crowd of 30 our visitor is far back, and its polls are answered from
  // its place cookie and the isolate's snapshot (docs/uncapped-line.md).
  const stack = startStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  let browser;
  try {
    const base = await stack.url;
    await crowd(base, 30);
    browser = await launch();
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems = [], replies = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    page.on("response", async (r) => {
      if (/\/queue\/(enter|position)/.test(r.url())) replies.push(await r.json().catch(() => null));
    });
    // An estimate may come back higher than the place shown before it (by
    // the estimate's error, docs/uncapped-line.md): the first approximate
    // reply reaches the page raised well past the exact place, and the
    // page must not show its visitor going back.
    const real = [];
    await page.route("**/queue/position*", async (route) => {
      const response = await route.fetch();
      const json = await response.json();
      if (json.approximate === true && real.length === 0) {
        real.push(json.position);
        json.position += 500;
      }
      await route.fulfill({ response, json });
    });
    await page.goto(base + "/queue");
    await page.waitForSelector("#figures:not([hidden])", { timeout: 30_000 });
    const exact = await page.textContent("#position");
    assert.match(exact, /^\d+$/, "the entry's place is exact");
    const cookies = await context.cookies();
    assert.ok(cookies.some((c) => c.name === "qg_place" && c.value.startsWith("main.")), "a place cookie was set");
    // The next poll (the page waits retryAfterMs: 30 s this far back).
    await page.waitForFunction(() => /^about /.test(document.querySelector("#position")?.textContent || ""),
      null, { timeout: 60_000, polling: 500 });
    const about = await page.textContent("#position");
    const n = Number(about.replace(/[^0-9]/g, ""));
    // The edge's own estimate lies between the near zone and the entry's
    // exact place.
    assert.equal(real.length, 1);
    assert.ok(real[0] >= 9 && real[0] <= Number(exact), `estimate ${real[0]}, entered at ${exact}`);
    const far = replies.filter((r) => r && r.approximate === true);
    assert.ok(far.length >= 1, JSON.stringify(replies));
    assert.equal(far[0].state, "waiting");
    // The page saw the raised reply, and still shows the place it had:
    // number, tab title and bar.
    assert.equal(far[0].position, real[0] + 500);
    assert.equal(n, Number(exact), `shown ${about} after a reply of ${far[0].position}, entered at ${exact}`);
    assert.ok((await page.title()).startsWith(`(${exact}) `), await page.title());
    assert.equal(await page.$eval("#progress", (e) => e.value), 0);
    await page.screenshot({ path: join(artifacts, "browser-far-back.png") });
    // (The first enter's 403 challenge_required is logged as a failed
    // load; only script errors such as CSP violations count.)
    assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});

test("a person who opens a protected page is sent to the room and back to that page", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  // The stack protects GET /tickets/* (tools/src/stack.rs) beside POST
  // /orders. With a line waiting, a visit without a token is sent to the
  // room with the page it wanted; admitted, Continue leads back there.
  const stack = startStack(["--admit-rate", "4", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  let browser;
  try {
    const base = await stack.url;
    await crowd(base, 24);
    browser = await launch();
    const page = await browser.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    await page.goto(base + "/tickets/7?seat=A12");
    assert.equal(new URL(page.url()).pathname, "/queue", `sent to the room, at ${page.url()}`);
    assert.equal(new URL(page.url()).searchParams.get("return"), "/tickets/7?seat=A12");
    await page.waitForSelector("#figures:not([hidden]), #continue:not([hidden])", { timeout: 60_000 });
    await page.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 60_000 });
    assert.equal(await page.getAttribute("#continue", "href"), "/tickets/7?seat=A12");
    await page.screenshot({ path: join(artifacts, "browser-return-admitted.png") });
    await page.click("#continue");
    await page.waitForURL(/\/tickets\/7\?seat=A12$/);
    assert.equal(await page.textContent("#ticket"), "Ticket 7 is yours");
    // A page of the checkout is a browse route (README, *Browse and spend
    // routes*): reloading it, or opening it again, passes on the session.
    await page.reload();
    assert.equal(await page.textContent("#ticket"), "Ticket 7 is yours");
    await page.goto(base + "/tickets/8");
    assert.equal(await page.textContent("#ticket"), "Ticket 8 is yours");
    assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});

test("a form posted to the order route in a busy room is kept and sent again on Continue: one order, its fields", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--admit-rate", "4", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  let browser;
  try {
    const base = await stack.url;
    await crowd(base, 24);
    browser = await launch();
    const page = await browser.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    await page.goto(base + "/checkout");
    await page.fill('input[name="seat"]', "B 7 & more");
    await page.click("#form-order");
    // The room, at its own address (a reload asks for the room, not the
    // POST again), its Continue leading to the form's action.
    await page.waitForURL(/\/queue\?/);
    assert.equal(new URL(page.url()).searchParams.get("return"), "/orders");
    await page.reload();
    await page.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 60_000 });
    assert.match(await page.textContent("#note"), /order form is kept/);
    await page.screenshot({ path: join(artifacts, "browser-form-admitted.png") });
    await page.click("#continue");
    await page.waitForURL(/\/orders$/);
    const reply = JSON.parse(await page.textContent("body"));
    assert.deepEqual(reply.fields, { item: "ticket", seat: "B 7 & more" });
    const shop = await (await fetch(base + "/_demo/conditions")).json();
    assert.equal(shop.orders, 1, JSON.stringify(shop));
    assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});

test("with Turnstile on, the page renders the widget, says why a check failed and joins once it passes", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  // A local stand-in of Turnstile's script and siteverify (queuegate-dev
  // --turnstile-stand-in): its widget is a button that "solves" the check.
  const stack = startStack(["--challenge-difficulty", "5000", "--turnstile-stand-in", "--exit-after", "110"]);
  let browser;
  try {
    const base = await stack.url;
    browser = await launch();
    const page = await browser.newPage();
    const problems = [], csp = [];
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(m.text());
      if (/Content Security Policy/.test(m.text())) csp.push(m.text());
    });
    const resp = await page.goto(base + "/queue");
    const policy = resp.headers()["content-security-policy"];
    const origin = new URL((await page.evaluate(() =>
      JSON.parse(document.getElementById("qg-config").textContent).turnstile.script))).origin;
    assert.match(policy, new RegExp(`script-src 'sha256-[^']+' ${origin};`));
    assert.match(policy, new RegExp(`frame-src ${origin};`));
    // The proof of work first, then the widget, with a hint.
    const button = await page.waitForSelector("#ts-box:not([hidden]) .ts-stand-in", { timeout: 60_000 });
    assert.match(await page.textContent("#note"), /complete the check/);
    // A failed check: plain words, and the widget again.
    await page.evaluate(() => { window.turnstileStandIn = "fail"; });
    await button.click();
    await page.waitForFunction(() => /did not pass/.test(document.querySelector("#status").textContent),
      null, { timeout: 15_000 });
    await page.screenshot({ path: join(artifacts, "browser-turnstile-failed.png") });
    assert.equal(await page.isVisible("#ts-box .ts-stand-in"), true, "the widget is back");
    // Passed: the visitor takes a place (the solved proof of work went
    // along; it was not spent by the refusals). The room is empty, so it
    // is admitted on entry.
    const replies = [];
    page.on("response", async (r) => {
      if (/\/queue\/enter/.test(r.url())) replies.push(`${r.status()} ${await r.text().catch(() => "")}`);
    });
    await page.click("#ts-box .ts-stand-in");
    await page.waitForSelector("#figures:not([hidden]), #continue:not([hidden])", { timeout: 20_000 })
      .catch(async (e) => { throw new Error(`${e.message}\nstatus: ${await page.textContent("#status")}\nreplies: ${replies.join("\n")}\n${stack.log().slice(-3000)}`); });
    assert.equal(await page.isVisible("#ts-box"), false);
    assert.equal(await page.textContent("#note"), "");
    await page.screenshot({ path: join(artifacts, "browser-turnstile-waiting.png") });
    assert.deepEqual(csp, []);
    assert.deepEqual(problems.filter((p) => /Uncaught/.test(p)), []);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});

test("the operator's notice shows on the page within a poll, as text; a revocation, as its own state", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  let browser;
  try {
    const base = await stack.url;
    await crowd(base, 4);
    browser = await launch();
    const page = await browser.newPage();
    await page.goto(base + "/queue");
    await page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
    assert.equal(await page.isVisible("#notice"), false);
    // The operator's command, as an operator runs it.
    const dir = mkdtempSync(join(tmpdir(), "qg-notice-"));
    const run = operator(stack.redis(), dir);
    const text = "<b>Sizes S & M</b> are sold out";
    assert.match(run("notice", "main", "--set", text), /notice "<b>Sizes S & M<\/b> are sold out" \(was none\)/);
    await page.waitForSelector("#notice:not([hidden])", { timeout: 45_000 });
    assert.equal(await page.textContent("#notice"), text, "shown as text, not markup");
    assert.equal(await page.$("#notice b"), null);
    await page.screenshot({ path: join(artifacts, "browser-notice.png") });
    run("notice", "main", "--clear");
    await page.waitForSelector("#notice", { state: "hidden", timeout: 45_000 });
    // The operator revokes this visitor: the page says so at its next poll
    // and shows no place any more.
    const visitor = (await page.context().cookies()).find((c) => c.name === "qg_visitor");
    const id = visitor.value.split(".")[0];
    assert.match(run("visitor", "main", "--id", id, "--revoke"), /revoked \(was waiting\)/);
    await page.waitForFunction(() => document.querySelector("#status").textContent.includes("withdrew"),
      null, { timeout: 45_000 });
    assert.equal(await page.textContent("#status"),
      "The shop withdrew your place in this queue. If you think this is a mistake, please contact the shop.");
    assert.equal(await page.isVisible("#figures"), false);
    assert.equal(await page.isVisible("#rejoin"), false, "no way back in while revoked");
    await page.screenshot({ path: join(artifacts, "browser-revoked.png") });
    rmSync(dir, { recursive: true, force: true });
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});

test("a Korean visitor gets the page in Korean, times in Korean, and the notice in Korean", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-korean-"));
  let browser;
  try {
    const base = await stack.url;
    await crowd(base, 3);
    browser = await launch();
    // The browser's language: Accept-Language ko-KR and navigator.language.
    const context = await browser.newContext({ locale: "ko-KR", timezoneId: "Asia/Seoul" });
    const page = await context.newPage();
    await page.goto(base + "/queue");
    await page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
    assert.equal(await page.getAttribute("html", "lang"), "ko");
    assert.equal(await page.textContent("#heading"), "대기열에서 기다리는 중입니다");
    assert.equal(await page.textContent("#position-label"), "내 순서");
    assert.equal(await page.getAttribute("#progress", "aria-label"), "대기열 진행 상황");
    assert.match(await page.textContent("#eta"), /\d+\s*(초|분)/);
    // "You will be admitted at about {t}" in Korean, the time in Korean.
    await page.waitForSelector("#eta-at:not([hidden])", { timeout: 30_000 });
    assert.match(await page.textContent("#eta-at"), /(오전|오후) \d{1,2}:\d{2}/);
    // The operator's notice in Korean beside the default (issue 36): this
    // visitor sees the Korean text, as text; an English browser the
    // default.
    const run = operator(stack.redis(), dir);
    assert.match(run("notice", "main", "--set", "Sizes S and M are sold out", "--lang", "ko=S, M 사이즈 <b>품절</b>",
      "--lang", "de=Größen S und M ausverkauft"), /ko: "S, M 사이즈 <b>품절<\/b>"/);
    await page.waitForSelector("#notice:not([hidden])", { timeout: 45_000 });
    assert.equal(await page.textContent("#notice"), "S, M 사이즈 <b>품절</b>");
    assert.equal(await page.$("#notice b"), null, "text, not markup");
    const english = await browser.newContext({ locale: "en-US" });
    const other = await english.newPage();
    await other.goto(base + "/queue");
    await other.waitForSelector("#notice:not([hidden])", { timeout: 60_000 });
    assert.equal(await other.textContent("#notice"), "Sizes S and M are sold out");
    assert.match(await other.title(), /Demo shop — waiting room$/, "the operator's PAGE_TITLE in every language");
    await english.close();
    await page.screenshot({ path: join(artifacts, "browser-korean.png") });
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(check, ms, what) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(50);
  }
}
// A Redis command against the stack's redis-server, as an operator would.
const redisCli = (url, ...args) => execFileSync("redis-cli", ["-u", url, ...args], { encoding: "utf8", timeout: 10_000 }).trim();

// Issue 36: a phone that slept must learn its state when it wakes. Headless
// Chromium's pages are always visible, so a hidden tab shown again is
// emulated (document.visibilityState and its event); offline and online
// are the browser's own (the context's network), and a page restored from
// the back/forward cache its own pageshow event. Each poll is counted when
// the worker's answer reaches the browser (near the head the worker may
// answer from its snapshot, so Redis does not see every poll).
test("the page polls at once when it wakes (shown again, restored, back online), never twice at once", { timeout: 150_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--admit-rate", "1", "--challenge-difficulty", "5000", "--exit-after", "140"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-wake-"));
  let browser;
  try {
    const base = await stack.url;
    // Paused: the line stands still and the page waits the longest
    // interval between polls, so a prompt poll can only be a wake-up.
    assert.match(operator(stack.redis(), dir)("pause", "main"), /paused/);
    await crowd(base, 2);
    browser = await launch();
    const context = await browser.newContext();
    await context.addInitScript(spies);
    const page = await context.newPage();
    const problems = [], sent = [], answered = [];
    page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
    page.on("request", (r) => { if (/\/queue\/position\?/.test(r.url())) sent.push(Date.now()); });
    page.on("response", (r) => { if (/\/queue\/position\?/.test(r.url())) answered.push({ at: Date.now(), status: r.status() }); });
    await page.goto(base + "/queue");
    await page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
    assert.equal(await number(page, "#position"), 3);
    const lastReply = async () => (await page.evaluate(() => window.__qg.calls)).filter((c) => c.reply).pop();
    const first = await lastReply();
    assert.equal(first.state, "waiting");
    assert.ok(first.retryAfterMs >= 10_000, `the page's timer waits ${first.retryAfterMs} ms`);
    const visibility = (state) => page.evaluate((s) => {
      Object.defineProperty(document, "visibilityState", { value: s, configurable: true });
      Object.defineProperty(document, "hidden", { value: s === "hidden", configurable: true });
      document.dispatchEvent(new Event("visibilitychange"));
    }, state);
    // One wake-up: a poll within a second of it, answered by the worker,
    // seen at Redis, long before the page's timer was due.
    const wakes = [];
    const wakesUp = async (how, wake) => {
      await sleep(2_500); // past the page's "just answered" guard
      const before = answered.length, due = (await lastReply()).at + (await lastReply()).retryAfterMs;
      const at = Date.now();
      await wake();
      await until(() => answered.length > before, 3_000, `a poll after ${how}`);
      const took = answered[before].at - at;
      assert.equal(answered[before].status, 200, how);
      assert.ok(took < 1_500, `${how}: polled ${took} ms after`);
      assert.ok(answered[before].at < due, `${how}: before the timer (due in ${due - at} ms)`);
      wakes.push(`${how} ${took} ms`);
    };

    // Hidden: no poll (the timer keeps its own pace); shown again: at once.
    await sleep(2_500);
    let before = sent.length;
    await visibility("hidden");
    await sleep(1_500);
    assert.equal(sent.length, before, "a hidden page does not poll on hiding");
    await wakesUp("shown again", () => visibility("visible"));

    // Offline, then online (the browser's own events).
    await sleep(2_500);
    before = sent.length;
    await context.setOffline(true);
    await sleep(1_000);
    assert.equal(sent.length, before, "going offline is no reason to poll");
    await wakesUp("back online", () => context.setOffline(false));

    // Restored from the back/forward cache (this page is no-store, so
    // Chromium reloads it instead; the event is what a cache restore fires).
    await wakesUp("restored (pageshow, persisted)", () => page.evaluate(() =>
      window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true })))); 
    // An ordinary pageshow (a first load) is no wake-up.
    await sleep(2_500);
    before = sent.length;
    await page.evaluate(() => window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: false })));
    await sleep(1_500);
    assert.equal(sent.length, before, "a pageshow without the cache");

    // Never two at once: every wake-up event together, and again while
    // that poll is held in flight, makes one poll.
    await sleep(2_500);
    await page.route("**/queue/position*", async (route) => { await sleep(1_500); await route.continue(); }, { times: 1 });
    before = sent.length;
    const all = () => page.evaluate(() => {
      Object.defineProperty(document, "visibilityState", { value: "visible", configurable: true });
      document.dispatchEvent(new Event("visibilitychange"));
      window.dispatchEvent(new Event("online"));
      window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true }));
    });
    await all();
    await sleep(500);
    await all();
    await sleep(3_500);
    assert.equal(sent.length - before, 1, `one poll for six wake-up events, sent ${sent.length - before}`);
    // The page still shows its place, and its timer runs on.
    assert.equal(await number(page, "#position"), 3);
    assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
    console.log(`wake-up polls: ${wakes.join(", ")}`);
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 36: signed in, the shop's login token expires during the wait
// (Clerk's after 60 s). The demo shop is the login service (queuegate-dev
// --signed-in 60): its token script keeps a token until the page asks for
// a fresh one, the worst a login library can do, so every expiry is a 401
// the page must mend. Over a three-minute wait behind two buyers on a
// paused line, the buyer keeps one place (the same ticket in Redis, the
// same position on the page), is never told the visit could not be
// verified, and is admitted in turn after the resume.
const WAIT_S = 180;

test("signed in: tokens living 60 s, refreshed by the page over a 3-minute wait, keep one place", { timeout: 330_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--signed-in", "60", "--admit-rate", "1", "--exit-after", "320"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-login-"));
  let browser, keepAlive;
  try {
    const base = await stack.url;
    const admin = operator(stack.redis(), dir);
    assert.match(admin("pause", "main"), /paused/);
    // A login token from the shop, as the buyer's browser would get it.
    const tokenFor = async (user) => {
      const r = await fetch(`${base}/_demo/token`, { headers: { cookie: `demo_user=${user}` } });
      assert.equal(r.status, 200);
      return r.text();
    };
    const asUser = async (user, method, path) => {
      const r = await fetch(`${base}${path}?queue=main`, { method, headers: { authorization: `Bearer ${await tokenFor(user)}` } });
      return [r.status, await r.json()];
    };
    // Two buyers ahead, who keep polling with fresh tokens so they stay.
    for (const u of ["ahead-1", "ahead-2"]) {
      const [status, reply] = await asUser(u, "POST", "/queue/enter");
      assert.equal(status, 200, JSON.stringify(reply));
    }
    keepAlive = setInterval(() => {
      for (const u of ["ahead-1", "ahead-2"]) asUser(u, "GET", "/queue/position").catch(() => {});
    }, 20_000);

    browser = await launch();
    const context = await browser.newContext();
    await context.addCookies([{ name: "demo_user", value: "buyer-1", url: base }]);
    await context.addInitScript(spies);
    const page = await context.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error" && !/401/.test(m.text())) problems.push(m.text()); });
    const resp = await page.goto(base + "/queue");
    assert.match(resp.headers()["content-security-policy"], new RegExp(`script-src 'sha256-[^']+' ${base}/_demo/queuegate-token.js;`));
    await page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
    assert.equal(await number(page, "#position"), 3);
    const ticket = () => redisCli(stack.redis(), "ZSCORE", "qg:{main}:waiting", "buyer-1");
    const entered = ticket();
    assert.match(entered, /^\d+$/, "the place is the subject's: buyer-1 is in line");
    const t0 = Date.now();

    // The wait: the page polls at the paused line's pace (about 30 s).
    while (Date.now() - t0 < WAIT_S * 1000) {
      await sleep(10_000);
      assert.equal(ticket(), entered, `the same ticket after ${Math.round((Date.now() - t0) / 1000)} s`);
      assert.ok(await page.isHidden("#rejoin"), "no Try again button");
    }
    const { calls, said } = await page.evaluate(() => window.__qg);
    const replies = calls.filter((c) => c.reply);
    const refused = replies.filter((c) => c.error);
    const minted = (await (await fetch(`${base}/_demo/logins`)).json()).minted["buyer-1"];
    // Every refusal was an expired token, each mended by a fresh one.
    assert.ok(refused.length >= 1, `a token expired during the wait: ${JSON.stringify(replies)}`);
    assert.deepEqual([...new Set(refused.map((c) => c.error))], ["identity_invalid"]);
    assert.ok(minted >= refused.length + 1, `${minted} tokens for ${refused.length} expiries`);
    const waiting = replies.filter((c) => c.state === "waiting");
    assert.ok(waiting.length >= 5, `${waiting.length} answers in ${WAIT_S} s`);
    assert.deepEqual([...new Set(waiting.map((c) => c.position))], [3], "one place all along");
    assert.ok(!said.some(([, t]) => /could not verify/.test(t)), said.map(([, t]) => t).join(" | "));
    assert.equal(await number(page, "#position"), 3);
    console.log(`signed in over ${Math.round((Date.now() - t0) / 1000)} s: ${waiting.length} answers, `
      + `${refused.length} expired tokens refused (401), ${minted} tokens minted, ticket ${entered} kept`);

    // Resumed: the two ahead first, then this buyer, with the same subject.
    assert.match(admin("resume", "main"), /open|resumed/);
    await page.waitForSelector('#continue:not([hidden])[aria-disabled="false"]', { timeout: 60_000 });
    const [, ahead] = await asUser("ahead-2", "GET", "/queue/position");
    assert.equal(ahead.state, "admitted", "the buyers ahead went first");
    await page.screenshot({ path: join(artifacts, "browser-signed-in.png") });
    assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    clearInterval(keepAlive);
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});

// Signed in, but no token comes (the buyer is not logged in at the shop):
// the page asks the token script again, forcing a refresh, three times
// (after 1, 2 and 4 s), then says it could not verify the visit and offers
// Try again; once the buyer has logged in, Try again takes a place.
test("signed in without a token: asked again three times, then the error and Try again, which works once logged in", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--signed-in", "60", "--admit-rate", "1", "--exit-after", "110"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-nologin-"));
  let browser;
  try {
    const base = await stack.url;
    assert.match(operator(stack.redis(), dir)("pause", "main"), /paused/);
    browser = await launch();
    const context = await browser.newContext();
    await context.addInitScript(spies);
    const page = await context.newPage();
    const problems = [];
    page.on("console", (m) => { if (m.type() === "error" && !/40[13]/.test(m.text())) problems.push(m.text()); });
    const tokenAsks = [];
    page.on("request", (r) => { if (/\/_demo\/token/.test(r.url())) tokenAsks.push(Date.now()); });
    const t0 = Date.now();
    await page.goto(base + "/queue");
    await page.waitForFunction(() => /could not verify/.test(document.querySelector("#status").textContent),
      null, { timeout: 30_000 });
    const took = Date.now() - t0;
    const calls = (await page.evaluate(() => window.__qg.calls)).filter((c) => !c.reply);
    assert.equal(calls.length, 4, `one enter and three retries: ${JSON.stringify(calls)}`);
    assert.equal(tokenAsks.length, 4, "the token script asked the shop before each");
    assert.ok(took >= 7_000 && took < 20_000, `the error after ${took} ms (1 + 2 + 4 s of retries)`);
    assert.equal(await page.textContent("#rejoin"), "Try again");
    assert.equal(await page.isVisible("#figures"), false);
    await page.screenshot({ path: join(artifacts, "browser-signed-out.png") });
    // No more polls once it has said so.
    await sleep(5_000);
    assert.equal((await page.evaluate(() => window.__qg.calls)).filter((c) => !c.reply).length, 4);
    // Logged in now (the shop's session cookie): Try again takes a place.
    await context.addCookies([{ name: "demo_user", value: "late-buyer", url: base }]);
    await page.click("#rejoin");
    await page.waitForSelector("#figures:not([hidden])", { timeout: 20_000 });
    assert.equal(await number(page, "#position"), 1);
    assert.equal(redisCli(stack.redis(), "ZSCORE", "qg:{main}:waiting", "late-buyer") !== "", true);
    assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});

// Issue 40, a drop that knows its stock, as the page shows it in English
// and German: the chance that stock remains at the visitor's turn (in 10 %
// steps, in words when near certain either way), and the sold-out view
// with the operator's notice.
const STOCK = {
  en: {
    soldOut: ["Sold out", "The stock is gone. Keep this page open: if more comes back, it will tell you."],
    about: (p) => `Chance that stock remains at your turn: about ${p} %`,
    high: "Stock will very likely remain at your turn.",
    low: "Stock will very likely run out before your turn.",
    notice: "No more sizes today",
  },
  de: {
    soldOut: ["Ausverkauft", "Die Ware ist ausverkauft. Lassen Sie diese Seite geöffnet: Kommt wieder Ware hinzu, erfahren Sie es hier."],
    about: (p) => `Chance, dass noch Ware da ist, wenn Sie an der Reihe sind: etwa ${p} %`,
    high: "Wenn Sie an der Reihe sind, ist sehr wahrscheinlich noch Ware da.",
    low: "Die Ware ist sehr wahrscheinlich ausverkauft, bevor Sie an der Reihe sind.",
    notice: "Heute keine Größen mehr",
  },
};
const chanceText = (lang, c) => c >= 0.9 ? STOCK[lang].high : c <= 0.1 ? STOCK[lang].low
  : STOCK[lang].about(Math.round(c * 10) * 10);
const STOCK_QUIET = ["#figures", "#progress", "#eta-at", "#chance", "#continue", "#rejoin", "#notify-box"];

// The sold-out view in `lang`: heading, status, the notice, nothing of the
// waiting view, the tab's title.
async function assertSoldOut(page, lang) {
  const [heading, status] = STOCK[lang].soldOut;
  await page.waitForFunction((h) => document.querySelector("#heading").textContent === h, heading,
    { timeout: 60_000, polling: 200 });
  assert.equal(await page.textContent("#status"), status);
  assert.equal(await page.getAttribute("#status", "aria-live"), "polite");
  assert.equal(await page.isVisible("#notice"), true);
  assert.equal(await page.textContent("#notice"), STOCK[lang].notice);
  for (const quiet of STOCK_QUIET) assert.equal(await page.isVisible(quiet), false, `${lang}: ${quiet} hidden`);
  assert.ok((await page.title()).startsWith(`(${heading}) `), await page.title());
}

test("the page's stock texts in English and German: the chance in its wordings, sold out with the notice, a slow poll, back in line", { timeout: 120_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  // The worker's replies are edited in flight (the chance, the state, and
  // retryAfterMs shortened so each step is a poll away), so every wording
  // and its boundaries are seen; the next test has the scheduler's own.
  const stack = startStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"]);
  let browser;
  try {
    const base = await stack.url;
    await crowd(base, 3);
    browser = await launch();
    const visit = async (locale) => {
      const lang = locale.slice(0, 2);
      const context = await browser.newContext({ locale });
      // The delays the page set its timers for.
      await context.addInitScript(() => {
        const set = window.setTimeout;
        window.__delays = [];
        window.setTimeout = (fn, ms, ...rest) => { if (ms >= 1000) window.__delays.push(ms); return set(fn, ms, ...rest); };
      });
      const page = await context.newPage();
      const problems = [];
      page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
      const edit = { chance: 0.9, soldOut: false };
      await page.route(/\/queue\/(enter|position)\?/, async (route) => {
        const response = await route.fetch();
        const json = await response.json().catch(() => null);
        if (json?.state !== "waiting") return route.fulfill({ response });
        await route.fulfill({ response, json: edit.soldOut
          ? { state: "sold_out", queue: "main", notice: STOCK[lang].notice }
          : { ...json, chance: edit.chance, retryAfterMs: 1000 } });
      });
      await page.goto(base + "/queue");
      await page.waitForSelector("#chance:not([hidden])", { timeout: 60_000 });
      assert.equal(await page.getAttribute("html", "lang"), lang);
      assert.equal(await page.getAttribute("#chance", "aria-live"), "polite");
      // Each wording at its boundary, and no layout shift between them:
      // what follows the line stays where it was.
      const top = () => page.$eval("#status", (e) => e.getBoundingClientRect().top);
      const at = await top();
      for (const c of [0.9, 0.42, 0.1, 0.89, 0.11]) {
        edit.chance = c;
        await page.waitForFunction((t) => document.querySelector("#chance").textContent === t, chanceText(lang, c),
          { timeout: 10_000, polling: 100 });
        assert.equal(await top(), at, `${lang}: the status line moved at chance ${c}`);
        if (c === 0.42) await page.screenshot({ path: join(artifacts, `browser-chance-${lang}.png`) });
      }
      // Sold out: the view, and the next poll in 30 s (up to 20 % later),
      // since no Retry-After comes with it.
      edit.soldOut = true;
      await assertSoldOut(page, lang);
      const delay = (await page.evaluate(() => window.__delays)).pop();
      assert.ok(delay >= 30_000 && delay <= 36_000, `${lang}: next poll in ${delay} ms`);
      await page.screenshot({ path: join(artifacts, `browser-sold-out-${lang}.png`) });
      // A restock: back in line at the next poll (woken here by "online",
      // past the page's guard of 2 s after an answer).
      edit.soldOut = false;
      await sleep(2_100);
      await page.evaluate(() => window.dispatchEvent(new Event("online")));
      await page.waitForSelector("#figures:not([hidden])", { timeout: 10_000 });
      assert.equal(await page.textContent("#chance"), chanceText(lang, edit.chance));
      assert.equal(await page.isVisible("#status"), true);
      assert.notEqual(await page.textContent("#heading"), STOCK[lang].soldOut[0]);
      assert.deepEqual(problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
      await context.close();
    };
    await Promise.all([visit("en-US"), visit("de-DE")]);
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
  }
});

test("a drop that knows its stock: the scheduler's chance, sold out in English and German with the notice, a restock in the same order", { timeout: 240_000 }, async () => {
  mkdirSync(artifacts, { recursive: true });
  const stack = startStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "220"]);
  const dir = mkdtempSync(join(tmpdir(), "qg-stock-"));
  let browser;
  try {
    const base = await stack.url;
    const run = operator(stack.redis(), dir);
    // Two units for a line of five: our two visitors wait behind the crowd.
    run("stock", "main", "--set", "2");
    await crowd(base, 3);
    browser = await launch();
    const visit = async (locale) => {
      const lang = locale.slice(0, 2);
      const context = await browser.newContext({ locale });
      const page = await context.newPage();
      const problems = [], replies = [], polls = [];
      page.on("console", (m) => { if (m.type() === "error") problems.push(m.text()); });
      page.on("request", (r) => { if (/\/queue\/position\?/.test(r.url())) polls.push(Date.now()); });
      page.on("response", async (r) => {
        if (/\/queue\/(enter|position)\?/.test(r.url()) && r.ok()) {
          const at = Date.now();
          replies.push({ at, ...(await r.json().catch(() => ({}))) });
        }
      });
      await page.goto(base + "/queue");
      await page.waitForSelector("#chance:not([hidden])", { timeout: 60_000 });
      await until(() => replies.some((r) => r.state === "waiting"), 5_000, "a waiting reply");
      const reply = replies.findLast((r) => r.state === "waiting");
      assert.ok(typeof reply.chance === "number" && reply.chance >= 0 && reply.chance <= 1, JSON.stringify(reply));
      assert.equal(await page.textContent("#chance"), chanceText(lang, reply.chance));
      return { lang, context, page, replies, polls, problems, place: await number(page, "#position") };
    };
    const visitors = await Promise.all([visit("en-US"), visit("de-DE")]);
    const [first, second] = [...visitors].sort((a, b) => a.place - b.place);
    assert.ok(first.place < second.place, `${first.place} < ${second.place}`);

    // Sold out, with a notice in both languages: each page says so within
    // a poll (30 s this far back) and the edge's snapshot interval.
    run("notice", "main", "--set", STOCK.en.notice, "--lang", `de=${STOCK.de.notice}`);
    const soldAt = Date.now();
    run("stock", "main", "--set", "0");
    const told = await Promise.all(visitors.map(async (v) => {
      await assertSoldOut(v.page, v.lang);
      await v.page.screenshot({ path: join(artifacts, `browser-stock-sold-out-${v.lang}.png`) });
      return `${v.lang} ${((Date.now() - soldAt) / 1000).toFixed(1)} s`;
    }));
    console.log(`sold out shown after: ${told.join(", ")}`);
    // A newcomer is told sold out and gets no place.
    const late = await browser.newContext({ locale: "de-DE" });
    const newcomer = await late.newPage();
    await newcomer.goto(base + "/queue");
    await assertSoldOut(newcomer, "de");
    assert.ok(!(await late.cookies()).some((c) => c.name === "qg_place"), "no place cookie");
    await late.close();

    // A restock reopens the line in the same order; the pages hear of it
    // at their next poll, never sooner than the sold-out answer said
    // (retryAfterMs, the visitor's own interval; 30 s without one).
    // Paused first, so nobody is admitted while the two places are read.
    run("pause", "main");
    run("stock", "main", "--set", "5");
    await Promise.all(visitors.map((v) => v.page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 })));
    const [a, b] = [await number(first.page, "#position"), await number(second.page, "#position")];
    assert.ok(a < b && a <= first.place && b <= second.place, `after the restock ${a}, ${b}; before ${first.place}, ${second.place}`);
    for (const v of visitors) {
      for (const r of v.replies.filter((x) => x.state === "sold_out")) {
        const next = v.polls.find((t) => t > r.at), wait = r.retryAfterMs ?? 30_000;
        assert.ok(next === undefined || next - r.at >= wait - 1_000,
          `${v.lang}: polled ${next - r.at} ms after sold out, told ${wait} ms`);
      }
      assert.deepEqual(v.problems.filter((p) => /Content Security Policy|Uncaught/.test(p)), []);
    }
  } catch (e) {
    throw new Error(`${e.message}\n--- stack log ---\n${stack.log().slice(-4000)}`);
  } finally {
    if (browser) await browser.close();
    stop(stack.child);
    rmSync(dir, { recursive: true, force: true });
  }
});
