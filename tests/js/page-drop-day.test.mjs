// The waiting-room page in a real browser on drop day: a visitor who comes
// before the opening sees the countdown, gets a drawn place and is notified
// of their turn, and a newcomer to the empty line is admitted on entry; far
// from the head the place shown is the edge's estimate ("about N").
// Screenshots land in artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import {
  artifacts,
  consoleErrors,
  crowd,
  number,
  operator,
  spies,
  withStack,
} from "./support/page.mjs";

const OPENS_IN = 50;
const CROWD = 12;

test("drop day: countdown, a drawn place at the opening, then the turn with a notification", { timeout: 170_000 }, () => withStack(["--admit-rate", "1", "--opens-in", String(OPENS_IN), "--exit-after", "160"], async ({ stack, base, browser, dir }) => {
  // Admission at 1/s: the last of 13 is admitted 13 s after the resume.
  const admin = operator(stack.redis(), dir);
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
  const problems = consoleErrors(page);
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
}));

test("far from the head the page shows an approximate place, answered at the edge", { timeout: 120_000 }, () => withStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ base, browser }) => {
  // At 0.05 admissions/s the near zone (180 s) is 9 visitors: behind a
  // crowd of 30 our visitor is far back, and its polls are answered from
  // its place cookie and the isolate's snapshot (docs/uncapped-line.md).
  await crowd(base, 30);
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = consoleErrors(page);
  const replies = [];
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
}));
