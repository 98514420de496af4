// The waiting-room page in a real browser, what the operator says and in
// which language: the operator's notice shows as text within a poll, a
// revoked visitor is told so, and a Korean browser gets the page, its times
// and the notice in Korean. Screenshots land in artifacts/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";

import {
  artifacts,
  withStack,
  crowd,
  operator,
} from "./support/page.mjs";

test("the operator's notice shows on the page within a poll, as text; a revocation, as its own state", { timeout: 120_000 }, () => withStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ stack, base, browser, dir }) => {
  await crowd(base, 4);
  const page = await browser.newPage();
  await page.goto(base + "/queue");
  await page.waitForSelector("#figures:not([hidden])", { timeout: 60_000 });
  assert.equal(await page.isVisible("#notice"), false);
  // The operator's command, as an operator runs it.
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
}));

test("a Korean visitor gets the page in Korean, times in Korean, and the notice in Korean", { timeout: 120_000 }, () => withStack(["--admit-rate", "0.05", "--challenge-difficulty", "5000", "--exit-after", "110"], async ({ stack, base, browser, dir }) => {
  await crowd(base, 3);
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
}));
