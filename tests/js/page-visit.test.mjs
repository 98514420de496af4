// The waiting-room page in a real browser (Debian's Chromium driven by
// playwright-core), the visit: a visitor passes the proof-of-work check,
// enters behind a synthetic crowd, sees their position and ETA fall, is
// admitted and completes an order through the protected route; a challenge
// gone stale while it was solved (the line grew past a difficulty level) is
// solved again without an error; a person who opens a protected page is
// sent to the room and back; a form posted in a busy room is kept and sent
// again; with Turnstile on (a local stand-in) the page renders the widget,
// says why a check failed and joins once it passes; and the page polls at
// once when it wakes. Screenshots land in artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import {
  artifacts,
  consoleErrors,
  crowd,
  number,
  operator,
  sleep,
  solution,
  solveReport,
  spies,
  until,
  withStack,
} from "./support/page.mjs";

test("a visitor waits, is admitted and orders through the gate", { timeout: 170_000 }, () => withStack(undefined, async ({ base, browser }) => {
  // Without a solution, a new place is refused and nothing is written.
  const bare = await fetch(`${base}/queue/enter?queue=main`, { method: "POST" });
  assert.equal(bare.status, 403);
  assert.equal((await bare.json()).error, "challenge_required");
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
}));

// The line grows while the page solves: the solution's level is below the
// one in force when it arrives (403 challenge_stale), and the page fetches a
// harder challenge and solves it again, showing no error.
test("a challenge gone stale while solving is solved again without an error", { timeout: 120_000 }, () => withStack(["--max-waiting", "8", "--challenge-crowd", "8", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ stack, base, browser, dir }) => {
  // A line of 8 whose challenge counts from 8: from 4 the level is 1
  // (maxnumber x2).
  // Paused: nobody is admitted or passes straight through, so the crowd
  // below stays in line.
  assert.match(operator(stack.redis(), dir)("pause", "main"), /paused/);
  const context = await browser.newContext();
  await context.addInitScript(spies);
  const page = await context.newPage();
  const problems = consoleErrors(page);
  const issued = [];
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
}));

test("a person who opens a protected page is sent to the room and back to that page", { timeout: 120_000 }, () => withStack(["--admit-rate", "4", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ base, browser }) => {
  // The stack protects GET /tickets/* (tools/src/stack.rs) beside POST
  // /orders. With a line waiting, a visit without a token is sent to the
  // room with the page it wanted; admitted, Continue leads back there.
  await crowd(base, 24);
  const page = await browser.newPage();
  const problems = consoleErrors(page);
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
}));

test("a form posted to the order route in a busy room is kept and sent again on Continue: one order, its fields", { timeout: 120_000 }, () => withStack(["--admit-rate", "4", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ base, browser }) => {
  await crowd(base, 24);
  const page = await browser.newPage();
  const problems = consoleErrors(page);
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
}));

test("with Turnstile on, the page renders the widget, says why a check failed and joins once it passes", { timeout: 120_000 }, () => withStack(["--challenge-difficulty", "5000", "--turnstile-stand-in", "--exit-after", "110"], async ({ stack, base, browser }) => {
  // A local stand-in of Turnstile's script and siteverify (queuegate-dev
  // --turnstile-stand-in): its widget is a button that "solves" the check.
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
}));

// Issue 36: a phone that slept must learn its state when it wakes. Headless
// Chromium's pages are always visible, so a hidden tab shown again is
// emulated (document.visibilityState and its event); offline and online
// are the browser's own (the context's network), and a page restored from
// the back/forward cache its own pageshow event. Each poll is counted when
// the worker's answer reaches the browser (near the head the worker may
// answer from its snapshot, so Redis does not see every poll).
test("the page polls at once when it wakes (shown again, restored, back online), never twice at once", { timeout: 150_000 }, () => withStack(["--admit-rate", "1", "--challenge-difficulty", "5000", "--exit-after", "140"], async ({ stack, base, browser, dir }) => {
  // Paused: the line stands still and the page waits the longest
  // interval between polls, so a prompt poll can only be a wake-up.
  assert.match(operator(stack.redis(), dir)("pause", "main"), /paused/);
  await crowd(base, 2);
  const context = await browser.newContext();
  await context.addInitScript(spies);
  const page = await context.newPage();
  const problems = consoleErrors(page);
  const sent = [], answered = [];
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
}));
