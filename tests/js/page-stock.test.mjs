// The waiting-room page in a real browser for a drop that knows its stock:
// the chance that stock remains and the sold-out view, in English and
// German, and a restock that brings the line back in the same order.
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
  sleep,
  until,
  withStack,
} from "./support/page.mjs";

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

test("the page's stock texts in English and German: the chance in its wordings, sold out with the notice, a slow poll, back in line", { timeout: 120_000 }, () => withStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ base, browser }) => {
  // The worker's replies are edited in flight (the chance, the state, and
  // retryAfterMs shortened so each step is a poll away), so every wording
  // and its boundaries are seen; the next test has the scheduler's own.
  await crowd(base, 3);
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
    const problems = consoleErrors(page);
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
}));

test("a drop that knows its stock: the scheduler's chance, sold out in English and German with the notice, a restock in the same order", { timeout: 240_000 }, () => withStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "220"], async ({ stack, base, browser, dir }) => {
  const run = operator(stack.redis(), dir);
  // Two units for a line of five: our two visitors wait behind the crowd.
  run("stock", "main", "--set", "2");
  await crowd(base, 3);
  const visit = async (locale) => {
    const lang = locale.slice(0, 2);
    const context = await browser.newContext({ locale });
    const page = await context.newPage();
    const problems = consoleErrors(page);
    const replies = [], polls = [];
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
}));
