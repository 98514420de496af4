//! Farm mode: a drop under attack (issue #22 §5). Before a scheduled
//! opening, **N humans** (one address each) and **a bot farm** (K
//! addresses, M identities each) take places in the pre-queue; the opening
//! draws them into line, and the run stops once the first N have been
//! admitted. What it measures: the bots' share of those first N against
//! their share of the addresses, the humans refused and why, and what the
//! farm spent (requests, CPU seconds of solving).
//!
//! * A **human** arrives at a time of its own (evenly over the first
//!   `arrive_share` of the time to the opening), fetches a challenge and
//!   solves it at the page's measured speed — the number is found with the
//!   native solver (so the edge gets a real solution), then the client
//!   sleeps until `(number + 1) / human_hashes_per_s` has passed, the time
//!   the page's Web Worker takes to count up to it (BENCHMARKS.md: ~90 k
//!   hashes/s in Chromium). It enters once, then polls as told
//!   (`retryAfterMs`) until admitted.
//! * A **bot address** takes places for its M identities from the start,
//!   `farm_lanes` at a time, as fast as the per-address budget allows: a
//!   fresh identity (no cookie) fetches a challenge, solves it with the
//!   native solver for real (thread CPU time measured), and enters; on
//!   429 `too_many_entries` it waits the `Retry-After` and sends the same
//!   solution again (a refused place does not spend it). Every placed
//!   identity then keeps itself alive by polling as told, like the page.
//!
//! Every client sends its own address in `CF-Connecting-IP` (the header the
//! worker reads): humans from 198.18.0.0/16, the farm from 198.19.0.0/16.
//!
//! **Shared and wide addresses** (issue #38):
//!
//! * `farm_ipv6`: the farm's K addresses are K distinct IPv6 /64s inside
//!   one /48, 2001:db8:ff00::/48 ([`farm_address_v6`]: the 4th hextet is
//!   `(k mod 256) << 8 | k / 256`, so the first 256 fall in 256 different
//!   /56s, and more share them evenly). The product counts a /56 as at
//!   most 4 addresses and a /48 as at most 16 (`PER_56`, `PER_48`); the
//!   report gives the farm's share of addresses counted that way and
//!   naively (each /64 one address).
//! * `nat_humans`: a crowd of people who all share one IPv4 address,
//!   [`NAT_ADDRESS`] (outside the humans' 198.18.0.1–198.18.234.96),
//!   arriving over the same window as the humans, interleaved with them.
//!   Each enters once and, like the page, waits out a 429 and sends its
//!   solution again. The report gives Spearman's ρ between their arrival
//!   order (their successful enter) and their admission order, and how
//!   many were among the first N admitted. With a crowd behind NAT the
//!   run goes on until the line is empty (everyone placed admitted), not
//!   only until N are, so every one of them has an admission rank.
//!
//! **Defences.** The run uses the draw the build has ("off" on a build
//! with the uniform shuffle; "on" once the fair per-address draw is
//! merged), and optionally `entry_places_per_address` (a cap on live places
//! per address group), passed through to the queue settings unchanged;
//! `label` names the run in the report and the chart's file name.
//!
//! Admission order is exact: the tool reads each client's admitting tick
//! from its `status:<uid>` (`ISSUED|<ms>`) and its ticket from snapshots of
//! the line taken every 50 ms after the opening (a tick pops the head in
//! ticket order), over its own Redis connection, not the gateway.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use queuegate_edge::{altcha, CLIENT_IP_HEADER};
use queuegate_shared::fields::{config, stats};
use queuegate_shared::{QueueKeys, Settings, UserId};
use queuegate_testkit::now_ms;
use redis::aio::MultiplexedConnection;
use reqwest::{Client, Method};
use serde_json::Value as Json;
use tokio::sync::watch;

use super::counters::Counters;
use super::farm_report::{FarmReport, Kind, Party};
use super::visitor::{self, visitor_cookie, wants_challenge};
use crate::stack::{schedule_opening, Stack, StackOptions};

/// What to run.
#[derive(Debug, Clone)]
pub struct FarmOptions {
    /// Humans, one address each.
    pub humans: u64,
    /// The farm's addresses.
    pub farm_addresses: u64,
    /// Identities (places) each farm address tries to take.
    pub identities_per_address: u64,
    /// Identities each farm address enters at once (its concurrency).
    pub farm_lanes: u64,
    /// From the start of the run to the opening.
    pub opens_in: Duration,
    /// The humans arrive evenly over this share of `opens_in`.
    pub arrive_share: f64,
    /// The humans' solving speed (the page in a browser).
    pub human_hashes_per_s: f64,
    /// `entry_budget_per_minute` (0: no budget).
    pub entry_budget_per_minute: u64,
    /// `entry_budget_burst`.
    pub entry_budget_burst: u64,
    /// `challenge_max_number` (doubled by the edge as the line fills).
    pub challenge_max_number: u64,
    /// `max_waiting`; None: room for every human and every identity.
    pub max_waiting: Option<u64>,
    /// Admissions per second after the opening.
    pub admit_rate: f64,
    /// Shortest poll interval.
    pub poll_min_ms: u64,
    /// Longest poll interval (the pre-queue's far from the opening).
    pub poll_max_ms: u64,
    /// A client silent this long has left.
    pub abandon_after_ms: u64,
    /// `opening_spread_ms`.
    pub opening_spread_ms: u64,
    /// The defence under test: `entry_places_per_address` (None: not set;
    /// a build without the setting refuses to run with it).
    pub entry_places_per_address: Option<u64>,
    /// Names the run ("off", "on", …): report header and chart file name.
    pub label: String,
    /// The run stops by then whatever happens (from its start).
    pub deadline: Duration,
    /// The farm's addresses are IPv6 /64s of one /48 ([`farm_address_v6`]),
    /// not IPv4 addresses.
    pub farm_ipv6: bool,
    /// People who all share one IPv4 address, [`NAT_ADDRESS`] (0: none).
    pub nat_humans: u64,
}

impl FarmOptions {
    /// A tiny attack in ~20 s (the test): 12 humans, 2 addresses × 12.
    pub fn smoke() -> FarmOptions {
        FarmOptions {
            humans: 12,
            farm_addresses: 2,
            identities_per_address: 12,
            farm_lanes: 2,
            opens_in: Duration::from_secs(8),
            arrive_share: 0.5,
            human_hashes_per_s: 90_000.0,
            // 4 at once, then one every 0.5 s: each farm address meets the
            // budget and still places all 12 within ~4 s.
            entry_budget_per_minute: 120,
            entry_budget_burst: 4,
            challenge_max_number: 20_000,
            max_waiting: None,
            admit_rate: 20.0,
            poll_min_ms: 500,
            poll_max_ms: 2_000,
            abandon_after_ms: 10_000,
            opening_spread_ms: 1_000,
            entry_places_per_address: None,
            label: "smoke".into(),
            deadline: Duration::from_secs(30),
            farm_ipv6: false,
            nat_humans: 0,
        }
    }

    /// The same tiny run with issue #38's shapes: a farm of 20 IPv6 /64s of
    /// one /48 (one identity each: more /64s than the /48 counts as) and
    /// 6 people behind one NAT address beside the 12 humans.
    pub fn smoke_wide() -> FarmOptions {
        FarmOptions {
            farm_addresses: 20,
            identities_per_address: 1,
            farm_lanes: 1,
            farm_ipv6: true,
            nat_humans: 6,
            label: "smoke-wide".into(),
            ..FarmOptions::smoke()
        }
    }

    /// Rejects options that cannot make a meaningful run, and a defence
    /// setting this build's queue settings do not know.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.humans == 0 || self.humans > 60_000 {
            bail!("--humans must be 1 to 60000");
        }
        if self.nat_humans > 5_000 {
            bail!("--nat-humans must be 0 to 5000");
        }
        if self.farm_ipv6 && !(1..=65_536).contains(&self.farm_addresses) {
            bail!("--farm-ipv6 needs 1 to 65536 --farm-addresses (the /64s of one /48)");
        }
        if self.farm_addresses > 60_000 || self.identities_per_address > 100_000 {
            bail!("--farm-addresses must be at most 60000 and --identities-per-address at most 100000");
        }
        if !(1..=64).contains(&self.farm_lanes) {
            bail!("--farm-lanes must be 1 to 64");
        }
        if self.population() > 100_000 {
            bail!("humans, NAT humans and farm identities must be at most 100000 together");
        }
        if self.opens_in < Duration::from_secs(2) || self.opens_in >= self.deadline {
            bail!("--opens-in must be at least 2 s and before the deadline");
        }
        if self.deadline > Duration::from_secs(900) {
            bail!("--deadline-secs must be at most 900");
        }
        if !(self.arrive_share > 0.0 && self.arrive_share < 1.0) {
            bail!("the humans must arrive within the time before the opening (share in (0, 1))");
        }
        // Also refuses NaN.
        if !(1_000.0..=1e12).contains(&self.human_hashes_per_s) {
            bail!("--human-hashes-per-s must be 1000 to 1e12");
        }
        if self.label.is_empty()
            || !self
                .label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!("--farm-label must be letters, digits, '-' or '_' (it names the chart file)");
        }
        // The queue settings as the scheduler will check them, so a bad
        // value (or a setting this build lacks) is one clear error here, not
        // a scheduler that never opens the queue.
        let mut map = serde_json::Map::new();
        for (k, v) in self.queue_settings() {
            let value = match v.parse::<u64>() {
                Ok(n) => Json::from(n),
                Err(_) => Json::from(v.parse::<bool>().context("a queue setting")?),
            };
            map.insert(k, value);
        }
        map.insert("admit_rate_per_second".into(), Json::from(self.admit_rate));
        map.insert("max_active".into(), Json::from(self.population() + 100));
        let settings: Settings = serde_json::from_value(Json::Object(map)).map_err(|e| {
            if self.entry_places_per_address.is_some() && e.to_string().contains("unknown field") {
                anyhow::anyhow!(
                    "--entry-places-per-address: this build's queue settings have no `entry_places_per_address` ({e})"
                )
            } else {
                anyhow::anyhow!("the queue settings: {e}")
            }
        })?;
        settings
            .validate()
            .map_err(|e| anyhow::anyhow!("the queue settings: {e}"))?;
        Ok(())
    }

    /// Every identity the run may place.
    fn population(&self) -> u64 {
        self.humans.saturating_add(self.nat_humans).saturating_add(
            self.farm_addresses
                .saturating_mul(self.identities_per_address),
        )
    }

    /// Farm address `k`, IPv4 or IPv6 as the options say.
    fn farm_address(&self, k: u64) -> String {
        if self.farm_ipv6 {
            farm_address_v6(k)
        } else {
            farm_address(k)
        }
    }

    /// Queue settings beyond rate and slots, as TOML values.
    fn queue_settings(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = [
            ("poll_min_ms", self.poll_min_ms),
            ("poll_max_ms", self.poll_max_ms),
            ("abandon_after_ms", self.abandon_after_ms),
            ("opening_spread_ms", self.opening_spread_ms),
            (
                "max_waiting",
                self.max_waiting.unwrap_or(self.population() + 100),
            ),
            // The difficulty counts from the line's size, as it did when it
            // counted from max_waiting: the farm's figures stay comparable.
            (
                "challenge_crowd",
                self.max_waiting.unwrap_or(self.population() + 100),
            ),
            ("entry_budget_per_minute", self.entry_budget_per_minute),
            ("entry_budget_burst", self.entry_budget_burst),
            ("challenge_max_number", self.challenge_max_number),
            // Nobody orders in this run: tokens must not expire (nor slots,
            // `max_active` in the stack options, bind) before the first N
            // are admitted.
            ("token_ttl_ms", 300_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(n) = self.entry_places_per_address {
            out.push(("entry_places_per_address".into(), n.to_string()));
        }
        out
    }

    /// The settings in one line.
    fn describe(&self) -> String {
        format!(
            "{} humans (one address each, solving at {:.0} hashes/s, arriving over the first {:.0} s){} · farm {} {} × {} identities, {} at once per address (native solver) · opening at {:.0} s · entry budget {}/min burst {} per address · challenge max_number {} · max_waiting {} · admit {}/s · poll {}–{} ms · abandon after {} ms · opening spread {} ms · entry_places_per_address {} · deadline {} s",
            self.humans,
            self.human_hashes_per_s,
            self.opens_in.mul_f64(self.arrive_share).as_secs_f64(),
            if self.nat_humans > 0 {
                format!(
                    " · {} more behind one NAT address ({NAT_ADDRESS}), over the same window",
                    self.nat_humans
                )
            } else {
                String::new()
            },
            self.farm_addresses,
            if self.farm_ipv6 {
                "IPv6 /64s of one /48 (2001:db8:ff00::/48, 4th hextet (k mod 256) << 8 | k / 256: up to 256 in different /56s)"
            } else {
                "IPv4 addresses"
            },
            self.identities_per_address,
            self.farm_lanes,
            self.opens_in.as_secs_f64(),
            self.entry_budget_per_minute,
            self.entry_budget_burst,
            self.challenge_max_number,
            self.max_waiting.unwrap_or(self.population() + 100),
            self.admit_rate,
            self.poll_min_ms,
            self.poll_max_ms,
            self.abandon_after_ms,
            self.opening_spread_ms,
            self.entry_places_per_address
                .map_or_else(|| "unset".to_string(), |n| n.to_string()),
            self.deadline.as_secs(),
        )
    }
}

/// Human `i`'s address: 198.18.0.1 onwards.
pub fn human_address(i: u64) -> String {
    let n = i + 1;
    format!("198.18.{}.{}", (n >> 8) & 255, n & 255)
}

/// Farm address `k`'s address: 198.19.0.1 onwards.
pub fn farm_address(k: u64) -> String {
    let n = k + 1;
    format!("198.19.{}.{}", (n >> 8) & 255, n & 255)
}

/// The /48 an IPv6 farm's /64s are in.
pub const FARM_V6_48: [u16; 3] = [0x2001, 0x0db8, 0xff00];

/// IPv6 farm address `k` (k < 65,536): `2001:db8:ff00:<h>::1`, a /64 of
/// its own in one /48, with `h = (k mod 256) << 8 | k / 256` so the first
/// 256 are in 256 different /56s (a /56 is the 4th hextet's high byte)
/// and more share them evenly.
pub fn farm_address_v6(k: u64) -> String {
    let h = (((k & 0xff) << 8) | ((k >> 8) & 0xff)) as u16;
    let [a, b, c] = FARM_V6_48;
    std::net::Ipv6Addr::new(a, b, c, h, 0, 0, 0, 1).to_string()
}

/// The one IPv4 address every NAT human shares: in the humans' /16 but
/// past the last address they get (`--humans` is at most 60,000, so
/// 198.18.234.96).
pub const NAT_ADDRESS: &str = "198.18.255.254";

/// What every client shares.
struct Ctx {
    http: Client,
    base: String,
    start: Instant,
    end: Instant,
    /// Flips to true when the run is over.
    stop: watch::Receiver<bool>,
}

impl Ctx {
    /// Sleeps `d` unless the run ends first; false when it did.
    async fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        if until >= self.end || *self.stop.borrow() {
            return false;
        }
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => true,
            _ = stop.wait_for(|s| *s) => false,
        }
    }

    fn over(&self) -> bool {
        Instant::now() >= self.end || *self.stop.borrow()
    }
}

/// A reply: status, `Retry-After` seconds, JSON body.
struct Reply {
    status: u16,
    retry_after_s: Option<u64>,
    body: Json,
}

/// One client identity (a human, or one of a bot address's identities).
struct Identity<'a> {
    ctx: &'a Ctx,
    address: String,
    cookie: String,
    party: Party,
}

impl Identity<'_> {
    async fn send(&mut self, method: Method, path: &str, altcha: Option<&str>) -> Option<Reply> {
        match path {
            "/queue/challenge" => self.party.requests.challenge += 1,
            "/queue/enter" => self.party.requests.enter += 1,
            _ => self.party.requests.position += 1,
        }
        let mut req = self
            .ctx
            .http
            .request(method, format!("{}{path}", self.ctx.base))
            .timeout(Duration::from_secs(10))
            .header(CLIENT_IP_HEADER, &self.address);
        if let Some(a) = altcha {
            req = req.header(altcha::HEADER, a);
        }
        if !self.cookie.is_empty() {
            req = req.header("cookie", &self.cookie);
        }
        let Ok(resp) = req.send().await else {
            self.party.errors += 1;
            return None;
        };
        if let Some(c) = visitor_cookie(&resp) {
            self.cookie = c;
        }
        let status = resp.status().as_u16();
        let retry_after_s = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        match resp.json::<Json>().await {
            Ok(body) if status < 500 => Some(Reply {
                status,
                retry_after_s,
                body,
            }),
            _ => {
                self.party.errors += 1;
                None
            }
        }
    }

    /// A challenge and its solution (the `X-Altcha` value and the number
    /// found), solved natively on a blocking thread whose CPU time is
    /// added to the party's spend.
    async fn solve(&mut self) -> Option<(String, u64)> {
        let reply = self.send(Method::GET, "/queue/challenge", None).await?;
        let challenge = serde_json::from_value::<altcha::Challenge>(reply.body).ok()?;
        let (found, cpu_ns) = tokio::task::spawn_blocking(move || {
            let before = thread_cpu_ns();
            let n = altcha::solve(&challenge).map(|n| (altcha::payload(&challenge, n), n));
            (n, thread_cpu_ns().zip(before).map(|(a, b)| a - b))
        })
        .await
        .ok()?;
        let (payload, number) = found?;
        self.party.spend.solves += 1;
        self.party.spend.hashes += number + 1;
        self.party.spend.cpu_ns += cpu_ns.unwrap_or(0);
        Some((payload, number))
    }

    /// Enters with `altcha` until placed or refused for good; for a 429
    /// `too_many_entries` waits the Retry-After and sends the same solution
    /// again when `retry_budget`. True once placed.
    async fn enter(&mut self, mut altcha: String, retry_budget: bool, human_rate: f64) -> bool {
        let mut fresh = 0;
        loop {
            let Some(r) = self.send(Method::POST, "/queue/enter", Some(&altcha)).await else {
                if !self.ctx.pause(Duration::from_secs(1)).await {
                    return false;
                }
                continue;
            };
            if (200..300).contains(&r.status) {
                self.party.entered_ms = Some(now_ms());
                self.party.entered_s = Some(self.ctx.start.elapsed().as_secs_f64());
                self.party.pre_queued = r.body["state"] == "pre_queue";
                return true;
            }
            let code = r.body["error"].as_str().unwrap_or("unknown").to_string();
            if code == "too_many_entries" {
                self.party.too_many += 1;
                if retry_budget {
                    let wait = Duration::from_secs(r.retry_after_s.unwrap_or(1).max(1));
                    if self.ctx.pause(wait).await {
                        continue;
                    }
                    return false;
                }
            }
            // A challenge that expired or was refused: a fresh one, twice.
            if wants_challenge(&r.body) && fresh < 2 {
                fresh += 1;
                self.party.solve_began = Some(Instant::now());
                let Some((a, n)) = self.solve().await else {
                    return false;
                };
                if self.party.kind != Kind::Bot && !self.human_pace(n, human_rate).await {
                    return false;
                }
                altcha = a;
                continue;
            }
            self.party.refused = Some(code);
            return false;
        }
    }

    /// Sleeps until a page counting at `rate` hashes/s would have reached
    /// `number` since the solve began (the native solve's wall time is
    /// part of it); false if the run ended.
    async fn human_pace(&mut self, number: u64, rate: f64) -> bool {
        let ms = ((number + 1) as f64 / rate * 1e3) as u64;
        self.party.spend.simulated_ms += ms;
        let began = self.party.solve_began.take().unwrap_or_else(Instant::now);
        let until = began + Duration::from_millis(ms);
        self.ctx
            .pause(until.saturating_duration_since(Instant::now()))
            .await
    }

    /// Polls as told until admitted, refused or the run ends.
    async fn poll_until_admitted(&mut self, seed: u64) {
        let mut wait_ms = 1_000u64;
        let mut n = 0u64;
        loop {
            n += 1;
            let jitter = 0.9 + 0.2 * visitor::unit(seed ^ n.rotate_left(32));
            if !self
                .ctx
                .pause(Duration::from_millis((wait_ms as f64 * jitter) as u64))
                .await
            {
                return;
            }
            let Some(r) = self.send(Method::GET, "/queue/position", None).await else {
                wait_ms = 1_000;
                continue;
            };
            match r.body["state"].as_str() {
                Some("waiting" | "pre_queue") => {
                    wait_ms = r.body["retryAfterMs"].as_u64().unwrap_or(1_000);
                }
                Some("admitted") => {
                    self.party.seen_admitted_s = Some(self.ctx.start.elapsed().as_secs_f64());
                    return;
                }
                Some(other) => {
                    self.party.ended = Some(other.to_string());
                    return;
                }
                None => {
                    self.party.errors += 1;
                    wait_ms = 1_000;
                }
            }
        }
    }

    /// The user id before the cookie's signature.
    fn uid(&self) -> Option<String> {
        let value = self.cookie.strip_prefix("qg_visitor=")?;
        Some(value.split('.').next()?.to_string())
    }

    fn finish(mut self) -> Party {
        self.party.uid = self.uid();
        self.party
    }
}

/// One person: arrives, solves at the page's pace, enters, polls. A
/// human has an address of its own; a NAT human shares [`NAT_ADDRESS`] and,
/// like the page, waits out a 429 `too_many_entries` and enters again.
async fn human(ctx: Arc<Ctx>, kind: Kind, i: u64, arrive: Duration, rate: f64) -> Party {
    let address = match kind {
        Kind::Nat => NAT_ADDRESS.to_string(),
        _ => human_address(i),
    };
    let mut me = Identity {
        ctx: &ctx,
        address: address.clone(),
        cookie: String::new(),
        party: Party::new(kind, address),
    };
    let until = ctx.start + arrive;
    if !ctx
        .pause(until.saturating_duration_since(Instant::now()))
        .await
    {
        return me.finish();
    }
    // A challenge request that fails is sent again after a second, as the
    // page's retry would (a loaded local edge drops a few).
    let mut tries = 0;
    let (altcha, number) = loop {
        me.party.solve_began = Some(Instant::now());
        match me.solve().await {
            Some(found) => break found,
            None if tries < 3 && ctx.pause(Duration::from_secs(1)).await => tries += 1,
            None => return me.finish(),
        }
    };
    if !me.human_pace(number, rate).await {
        return me.finish();
    }
    let (retry_budget, salt) = match kind {
        Kind::Nat => (true, 0x4E41_5400_0000),
        _ => (false, 0),
    };
    if me.enter(altcha, retry_budget, rate).await {
        me.poll_until_admitted(visitor::splitmix(i ^ salt ^ 0x4855_4D41))
            .await;
    }
    me.finish()
}

/// One farm address: `lanes` loops share its M identities and enter them
/// at once, so the per-address budget, not the farm's round trips, sets
/// its pace; each placed identity polls on a task of its own.
async fn farm_address_run(
    ctx: Arc<Ctx>,
    k: u64,
    address: String,
    identities: u64,
    lanes: u64,
) -> Vec<Party> {
    let next = Arc::new(AtomicU64::new(0));
    let lanes: Vec<_> = (0..lanes)
        .map(|_| {
            tokio::spawn(farm_lane(
                ctx.clone(),
                k,
                address.clone(),
                next.clone(),
                identities,
            ))
        })
        .collect();
    let mut out = Vec::new();
    for lane in lanes {
        if let Ok(parties) = lane.await {
            out.extend(parties);
        }
    }
    out
}

/// One lane of a farm address: takes the next identity until all M are
/// taken, solves and enters it (waiting out 429s), starts its poller.
async fn farm_lane(
    ctx: Arc<Ctx>,
    k: u64,
    address: String,
    next: Arc<AtomicU64>,
    identities: u64,
) -> Vec<Party> {
    let mut pollers = Vec::new();
    let mut out = Vec::new();
    loop {
        let j = next.fetch_add(1, Ordering::Relaxed);
        if j >= identities {
            break;
        }
        let mut id = Identity {
            ctx: &ctx,
            address: address.clone(),
            cookie: String::new(),
            party: Party::new(Kind::Bot, address.clone()),
        };
        if ctx.over() {
            out.push(id.finish());
            continue;
        }
        let placed = match id.solve().await {
            Some((altcha, _)) => id.enter(altcha, true, 0.0).await,
            None => false,
        };
        if !placed {
            out.push(id.finish());
            continue;
        }
        let (cookie, party) = (id.cookie, id.party);
        let ctx = ctx.clone();
        let address = address.clone();
        let seed = visitor::splitmix((k << 20) ^ j ^ 0xB075_FA12);
        pollers.push(tokio::spawn(async move {
            let mut id = Identity {
                ctx: &ctx,
                address,
                cookie,
                party,
            };
            id.poll_until_admitted(seed).await;
            id.finish()
        }));
    }
    for p in pollers {
        if let Ok(party) = p.await {
            out.push(party);
        }
    }
    out
}

/// The CPU time of the calling thread so far (ns), from
/// `/proc/thread-self/schedstat` (as the pow_cost bench reads it).
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Starts the stack, runs the humans and the farm through the opening,
/// stops once the first `humans` places have been admitted (or at the
/// deadline), and returns the report. Every process stops when this returns.
pub async fn run(opts: &FarmOptions) -> anyhow::Result<FarmReport> {
    opts.validate()?;
    let stack = Stack::start(&StackOptions {
        port: 0,
        admit_rate: opts.admit_rate,
        max_active: opts.population() + 100,
        settings: opts.queue_settings(),
        gateway_request_log: false,
        // The product's guard, as configured above: proof of work on, the
        // per-address budget from the settings.
        ..StackOptions::default()
    })
    .await?;
    let (keys, mut conn) = stack.main_queue().await?;
    let http = Client::builder().pool_max_idle_per_host(1_024).build()?;
    let (gw_url, gw_token) = (stack.gateway.url(), stack.gateway.token().to_string());
    let before = Counters::read(&http, &gw_url, &gw_token).await?;

    let start = Instant::now();
    let start_ms = now_ms();
    let opens_at = start_ms + opts.opens_in.as_millis() as u64;
    schedule_opening(&mut conn, &keys, opens_at).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctx = Arc::new(Ctx {
        http: http.clone(),
        base: stack.worker.url(),
        start,
        end: start + opts.deadline,
        stop: stop_rx,
    });
    let watcher = tokio::spawn(watch_line(
        conn.clone(),
        keys.clone(),
        start + opts.opens_in,
        start + opts.deadline,
        opts.humans,
        opts.nat_humans > 0,
        stop_tx,
    ));

    let before_humans = opts.opens_in.mul_f64(opts.arrive_share);
    let humans: Vec<_> = (0..opts.humans)
        .map(|i| {
            let arrive = before_humans.mul_f64(i as f64 / opts.humans as f64);
            tokio::spawn(human(
                ctx.clone(),
                Kind::Human,
                i,
                arrive,
                opts.human_hashes_per_s,
            ))
        })
        .collect();
    // The NAT crowd over the same window, between the humans' times.
    let nat: Vec<_> = (0..opts.nat_humans)
        .map(|j| {
            let arrive = before_humans.mul_f64((j as f64 + 0.5) / opts.nat_humans as f64);
            tokio::spawn(human(
                ctx.clone(),
                Kind::Nat,
                j,
                arrive,
                opts.human_hashes_per_s,
            ))
        })
        .collect();
    let farm: Vec<_> = (0..opts.farm_addresses)
        .map(|k| {
            tokio::spawn(farm_address_run(
                ctx.clone(),
                k,
                opts.farm_address(k),
                opts.identities_per_address,
                opts.farm_lanes,
            ))
        })
        .collect();
    let mut parties = Vec::new();
    for h in humans.into_iter().chain(nat) {
        parties.push(h.await?);
    }
    for f in farm {
        parties.extend(f.await?);
    }
    let line = watcher.await??;
    let run_s = start.elapsed().as_secs_f64();
    let after = Counters::read(&http, &gw_url, &gw_token).await?;

    // Each placed identity's admitting tick and ticket.
    let mut pipe = redis::pipe();
    let mut asked = Vec::new();
    for (i, p) in parties.iter().enumerate() {
        if let Some(user) = p.uid.as_deref().and_then(|u| UserId::new(u).ok()) {
            pipe.cmd("GET").arg(keys.status(&user));
            asked.push(i);
        }
    }
    let statuses: Vec<Option<String>> = if asked.is_empty() {
        Vec::new()
    } else {
        pipe.query_async(&mut conn).await?
    };
    for (i, status) in asked.into_iter().zip(statuses) {
        let p = &mut parties[i];
        p.issued_ms = status
            .as_deref()
            .and_then(queuegate_shared::fields::issued_at);
        p.ticket = p.uid.as_ref().and_then(|u| line.tickets.get(u).copied());
    }
    let (drawn, refused_budget): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
        .arg(keys.stats())
        .arg(stats::DRAWN)
        .arg(stats::REFUSED_BUDGET)
        .query_async(&mut conn)
        .await?;
    drop(stack);
    let counters = after.since(&before);
    Ok(FarmReport {
        machine: super::machine(),
        settings: opts.describe(),
        label: opts.label.clone(),
        humans: opts.humans,
        farm_addresses: opts.farm_addresses,
        identities_per_address: opts.identities_per_address,
        farm_ipv6: opts.farm_ipv6,
        nat_humans: opts.nat_humans,
        opens_at_s: (opens_at - start_ms) as f64 / 1e3,
        first_n_admitted_s: line.first_n_at.map(|t| (t - start_ms) as f64 / 1e3),
        run_s,
        drawn: drawn.unwrap_or(0),
        refused_budget: refused_budget.unwrap_or(0),
        round_trips: counters.round_trips,
        parties,
    })
}

/// What the line watcher saw.
struct Line {
    /// Every user id seen in the line after the opening → its ticket.
    tickets: HashMap<String, u64>,
    /// Epoch ms when `admitted` first reached the target.
    first_n_at: Option<u64>,
}

/// From the opening, snapshots the line every 50 ms (user → ticket) and
/// watches `admitted`; once it reaches `target` (and the draw is over;
/// with `until_empty`, and the line is empty too: everyone placed has
/// been admitted), waits one more second (clients see their admission)
/// and ends the run.
async fn watch_line(
    mut conn: MultiplexedConnection,
    keys: QueueKeys,
    opening: Instant,
    end: Instant,
    target: u64,
    until_empty: bool,
    stop: watch::Sender<bool>,
) -> anyhow::Result<Line> {
    let mut line = Line {
        tickets: HashMap::new(),
        first_n_at: None,
    };
    tokio::time::sleep_until(opening.into()).await;
    let mut stop_at = end;
    while Instant::now() < stop_at {
        let snapshot: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(keys.waiting())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        let empty = snapshot.is_empty();
        for (uid, ticket) in snapshot {
            line.tickets.entry(uid).or_insert(ticket as u64);
        }
        let (admitted, left): (Option<u64>, Option<u64>) = redis::pipe()
            .cmd("HGET")
            .arg(keys.stats())
            .arg(stats::ADMITTED)
            .cmd("HGET")
            .arg(keys.config())
            .arg(config::DRAW_LEFT)
            .query_async(&mut conn)
            .await?;
        let drawn = admitted.unwrap_or(0) >= target && left.unwrap_or(0) == 0;
        if line.first_n_at.is_none() && drawn {
            line.first_n_at = Some(now_ms());
        }
        if drawn && (!until_empty || empty) {
            stop_at = stop_at.min(Instant::now() + Duration::from_secs(1));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::guard::ClientAddress;
    use std::collections::HashSet;

    #[test]
    fn an_ipv6_farm_is_distinct_64s_of_one_48_spread_over_its_56s() {
        let groups: Vec<ClientAddress> = (0..65_536)
            .map(|k| ClientAddress::parse(&farm_address_v6(k)).expect("an address"))
            .collect();
        let distinct: HashSet<&str> = groups.iter().map(ClientAddress::as_str).collect();
        assert_eq!(distinct.len(), 65_536, "every k its own /64");
        let wider: Vec<(String, String)> =
            groups.iter().map(|g| g.wider().expect("IPv6")).collect();
        assert!(wider.iter().all(|(_, w48)| w48 == "2001:db8:ff00::/48"));
        let first_56s: HashSet<&str> = wider[..256].iter().map(|(w56, _)| w56.as_str()).collect();
        assert_eq!(first_56s.len(), 256, "the first 256 in 256 /56s");
        assert_eq!(farm_address_v6(0), "2001:db8:ff00::1");
        assert_eq!(farm_address_v6(1), "2001:db8:ff00:100::1");
        assert_eq!(farm_address_v6(257), "2001:db8:ff00:101::1");
    }

    #[test]
    fn the_nat_address_is_no_humans_and_no_farms() {
        let nat = ClientAddress::parse(NAT_ADDRESS).expect("an address");
        // --humans is at most 60,000.
        assert_eq!(human_address(59_999), "198.18.234.96");
        assert!((0..60_000).all(|i| human_address(i) != NAT_ADDRESS));
        assert!((0..60_000).all(|k| farm_address(k) != NAT_ADDRESS));
        assert_eq!(nat.wider(), None);
    }

    #[test]
    fn bad_shapes_are_clear_errors() {
        let ok = FarmOptions::smoke_wide();
        ok.validate().expect("the wide smoke run is valid");
        let err = |o: FarmOptions| o.validate().expect_err("refused").to_string();
        assert!(err(FarmOptions {
            nat_humans: 5_001,
            ..ok.clone()
        })
        .contains("--nat-humans"));
        assert!(err(FarmOptions {
            farm_addresses: 65_537,
            ..ok.clone()
        })
        .contains("--farm-ipv6"));
        assert!(err(FarmOptions {
            farm_addresses: 0,
            ..ok.clone()
        })
        .contains("--farm-ipv6"));
        // No farm at all is a run of people only.
        FarmOptions {
            farm_addresses: 0,
            farm_ipv6: false,
            nat_humans: 5_000,
            ..ok
        }
        .validate()
        .expect("a crowd behind NAT with no farm is valid");
    }
}
