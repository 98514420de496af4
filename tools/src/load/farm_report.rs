//! The figures of a farm run ([`super::farm`]): who got the first N
//! admissions, who was refused, what the farm spent; printed with the
//! counts they rest on, and drawn as one SVG chart.
//!
//! **The farm's share of addresses** is counted the way the product
//! counts address groups ([`counted_addresses`]): an IPv4 address is one,
//! an IPv6 /64 is one, but the /64s of one /56 count as at most
//! [`PER_56`] and those of one /48 as at most [`PER_48`]. So a farm of K
//! /64s in one /48 (`--farm-ipv6`) has min(K, 16) counted addresses, and
//! its counted share is min(K, 16) / (humans' addresses + the NAT
//! address + min(K, 16)); the naive share (each /64 one address) is
//! printed beside it. The target — the farm's share of the first N admitted at
//! most 1.5× its share of addresses — is against the counted share.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use plotters::prelude::*;
use queuegate_shared::guard::address::{PER_48, PER_56};
use queuegate_shared::guard::ClientAddress;
use queuegate_testkit::chart::{self, PALETTE};
use queuegate_testkit::measure::percentile;

/// The native solver's measured speed (BENCHMARKS.md, "Proof of work":
/// 8.44 M hashes per CPU-second on one core of this VM), for the spend at
/// that rate beside the CPU time this run measured.
pub const NATIVE_HASHES_PER_CPU_S: f64 = 8.44e6;

/// A human or one identity of the farm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A person: one address, one place.
    Human,
    /// One identity of a farm address.
    Bot,
    /// A person behind the one address the NAT crowd shares: one place.
    Nat,
}

/// Requests one client sent, by route.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// `GET /queue/challenge`.
    pub challenge: u64,
    /// `POST /queue/enter` (refused ones too).
    pub enter: u64,
    /// `GET /queue/position`.
    pub position: u64,
}

impl Requests {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.challenge + self.enter + self.position
    }
}

/// Proof-of-work spend of one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    /// Challenges solved.
    pub solves: u64,
    /// Hashes tried (the number found + 1 per solve).
    pub hashes: u64,
    /// Thread CPU time the native solver took (ns).
    pub cpu_ns: u64,
    /// A human's simulated solving time at the page's speed (ms).
    pub simulated_ms: u64,
}

/// One client identity and what happened to it.
#[derive(Debug, Clone)]
pub struct Party {
    /// Human or bot.
    pub kind: Kind,
    /// The `CF-Connecting-IP` it sent.
    pub address: String,
    /// Its user id (from the visitor cookie), once it had one.
    pub uid: Option<String>,
    /// Requests sent.
    pub requests: Requests,
    /// Solving.
    pub spend: Spend,
    /// 429 `too_many_entries` replies it got.
    pub too_many: u64,
    /// The refusal that ended its entry (`queue_full`, `too_many_entries`,
    /// `address_full`, …), if one did.
    pub refused: Option<String>,
    /// Requests that failed (no reply, 5xx, not JSON).
    pub errors: u64,
    /// Epoch ms of the enter that placed it.
    pub entered_ms: Option<u64>,
    /// The same, in seconds since the run's start.
    pub entered_s: Option<f64>,
    /// Placed in the pre-queue (before the opening).
    pub pre_queued: bool,
    /// Seconds since the start when it saw `admitted`.
    pub seen_admitted_s: Option<f64>,
    /// A state that ended its polling other than admitted (`abandoned`,
    /// `not_in_queue`, …).
    pub ended: Option<String>,
    /// The admitting tick (epoch ms), from `status:<uid>`.
    pub issued_ms: Option<u64>,
    /// Its ticket in the line, if a snapshot saw it.
    pub ticket: Option<u64>,
    /// When the current solve began (for a human's pacing).
    pub(crate) solve_began: Option<Instant>,
}

impl Party {
    /// A client that has done nothing yet.
    pub fn new(kind: Kind, address: String) -> Party {
        Party {
            kind,
            address,
            uid: None,
            requests: Requests::default(),
            spend: Spend::default(),
            too_many: 0,
            refused: None,
            errors: 0,
            entered_ms: None,
            entered_s: None,
            pre_queued: false,
            seen_admitted_s: None,
            ended: None,
            issued_ms: None,
            ticket: None,
            solve_began: None,
        }
    }
}

/// A farm run.
#[derive(Debug, Clone)]
pub struct FarmReport {
    /// `nproc` and the CPU.
    pub machine: String,
    /// The settings in one line.
    pub settings: String,
    /// The run's name ("off", "on", …).
    pub label: String,
    /// N: humans, and the admissions looked at.
    pub humans: u64,
    /// K.
    pub farm_addresses: u64,
    /// M.
    pub identities_per_address: u64,
    /// The farm's addresses are IPv6 /64s of one /48.
    pub farm_ipv6: bool,
    /// People behind one shared NAT address.
    pub nat_humans: u64,
    /// The opening, seconds after the start.
    pub opens_at_s: f64,
    /// When `admitted` reached N (seconds after the start).
    pub first_n_admitted_s: Option<f64>,
    /// The run's wall time.
    pub run_s: f64,
    /// Pre-queued places the draw placed (`drawn`).
    pub drawn: u64,
    /// Places the budget refused (`refused_budget`).
    pub refused_budget: u64,
    /// Redis round trips the edge made during the run (gateway counters).
    pub round_trips: u64,
    /// Every human, then every NAT human, then every farm identity.
    pub parties: Vec<Party>,
}

/// Counts for one side (humans or the farm).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Side {
    /// Identities (humans: N; farm: K × M).
    pub identities: u64,
    /// Addresses (distinct; an IPv6 address's /64).
    pub addresses: u64,
    /// Addresses as the product counts them ([`counted_addresses`]).
    pub counted_addresses: u64,
    /// Identities that got a place.
    pub placed: u64,
    /// … of them before the opening.
    pub pre_queued: u64,
    /// Among the first N admitted.
    pub first_n: u64,
    /// Admitted by the end of the run.
    pub admitted: u64,
    /// Requests sent.
    pub requests: Requests,
    /// Solving.
    pub spend: Spend,
    /// 429 `too_many_entries` replies.
    pub too_many: u64,
}

impl FarmReport {
    fn of(&self, kind: Kind) -> impl Iterator<Item = &Party> {
        self.parties.iter().filter(move |p| p.kind == kind)
    }

    /// Every admitted identity in admission order: by the admitting tick,
    /// then by ticket within a tick (one seen in no snapshot was popped
    /// before the first one, at the head).
    pub fn admission_order(&self) -> Vec<&Party> {
        let mut v: Vec<&Party> = self
            .parties
            .iter()
            .filter(|p| p.issued_ms.is_some())
            .collect();
        v.sort_by_key(|p| (p.issued_ms, p.ticket.unwrap_or(0)));
        v
    }

    /// The first N admitted (fewer if fewer were).
    pub fn first_n(&self) -> Vec<&Party> {
        let mut v = self.admission_order();
        v.truncate(self.humans as usize);
        v
    }

    /// Counts for one side.
    pub fn side(&self, kind: Kind) -> Side {
        let first: Vec<&Party> = self.first_n();
        let mut s = Side {
            first_n: first.iter().filter(|p| p.kind == kind).count() as u64,
            ..Side::default()
        };
        let (mut addresses, mut sent) = (BTreeSet::new(), BTreeSet::new());
        for p in self.of(kind) {
            s.identities += 1;
            addresses.insert(group_of(&p.address));
            sent.insert(p.address.as_str());
            s.placed += u64::from(p.entered_ms.is_some());
            s.pre_queued += u64::from(p.pre_queued);
            s.admitted += u64::from(p.issued_ms.is_some());
            s.requests.challenge += p.requests.challenge;
            s.requests.enter += p.requests.enter;
            s.requests.position += p.requests.position;
            s.spend.solves += p.spend.solves;
            s.spend.hashes += p.spend.hashes;
            s.spend.cpu_ns += p.spend.cpu_ns;
            s.spend.simulated_ms += p.spend.simulated_ms;
            s.too_many += p.too_many;
        }
        s.addresses = addresses.len() as u64;
        s.counted_addresses = counted_addresses(sent);
        s
    }

    /// Every side's addresses together: (distinct, counted).
    fn all_addresses(&self) -> (u64, u64) {
        let sides = [Kind::Human, Kind::Nat, Kind::Bot].map(|k| self.side(k));
        (
            sides.iter().map(|s| s.addresses).sum(),
            sides.iter().map(|s| s.counted_addresses).sum(),
        )
    }

    /// The farm's share of the addresses, counted as the product counts
    /// them: an IPv6 /56 as at most [`PER_56`], a /48 as at most
    /// [`PER_48`] ([`counted_addresses`]). The same as the naive share
    /// for an IPv4 farm.
    pub fn bot_address_share(&self) -> f64 {
        ratio(
            self.side(Kind::Bot).counted_addresses,
            self.all_addresses().1,
        )
    }

    /// The farm's share of the addresses with each IPv6 /64 one address.
    pub fn bot_address_share_naive(&self) -> f64 {
        ratio(self.side(Kind::Bot).addresses, self.all_addresses().0)
    }

    /// The farm's share of the places taken before the opening (what a
    /// uniform draw gives it).
    pub fn bot_place_share(&self) -> f64 {
        let (h, n, b) = (
            self.side(Kind::Human),
            self.side(Kind::Nat),
            self.side(Kind::Bot),
        );
        ratio(b.pre_queued, h.pre_queued + n.pre_queued + b.pre_queued)
    }

    /// Spearman's ρ between the NAT crowd's arrival order (the time of
    /// their enter that placed them) and their admission order, over
    /// those admitted (ties share their mean rank). None with fewer than
    /// two, or when either order is constant.
    pub fn nat_rank_correlation(&self) -> Option<f64> {
        let admitted: Vec<&Party> = self
            .admission_order()
            .into_iter()
            .filter(|p| p.kind == Kind::Nat && p.entered_ms.is_some())
            .collect();
        let arrival: Vec<f64> = admitted
            .iter()
            .map(|p| p.entered_ms.unwrap_or(0) as f64)
            .collect();
        let admission: Vec<f64> = (0..admitted.len()).map(|i| i as f64).collect();
        spearman(&arrival, &admission)
    }

    /// The NAT crowd's (arrival rank, admission rank), 1-based, over those
    /// admitted: the chart's scatter.
    pub fn nat_ranks(&self) -> Vec<(f64, f64)> {
        let admitted: Vec<&Party> = self
            .admission_order()
            .into_iter()
            .filter(|p| p.kind == Kind::Nat && p.entered_ms.is_some())
            .collect();
        let arrival: Vec<f64> = admitted
            .iter()
            .map(|p| p.entered_ms.unwrap_or(0) as f64)
            .collect();
        ranks(&arrival)
            .into_iter()
            .enumerate()
            .map(|(i, r)| (r, (i + 1) as f64))
            .collect()
    }

    /// The farm's share of the first N admitted.
    pub fn bot_first_n_share(&self) -> f64 {
        let b = self.side(Kind::Bot);
        ratio(b.first_n, self.first_n().len() as u64)
    }

    /// Humans who got no place, by the refusal's code (`not placed` when
    /// none came: the run ended, or requests failed).
    pub fn humans_refused(&self) -> BTreeMap<String, u64> {
        self.refused(Kind::Human)
    }

    /// Clients of `kind` who got no place, by the refusal's code.
    pub fn refused(&self, kind: Kind) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for p in self.of(kind).filter(|p| p.entered_ms.is_none()) {
            let code = p.refused.clone().unwrap_or_else(|| "not placed".into());
            *out.entry(code).or_default() += 1;
        }
        out
    }

    /// Humans placed who ended other than admitted (`abandoned`, …), by state.
    pub fn humans_dropped(&self) -> BTreeMap<String, u64> {
        self.dropped(Kind::Human)
    }

    /// Clients of `kind` placed who ended other than admitted, by state.
    pub fn dropped(&self, kind: Kind) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for p in self.of(kind) {
            if let Some(s) = &p.ended {
                *out.entry(s.clone()).or_default() += 1;
            }
        }
        out
    }

    /// Bots' share of the first `r` admitted, for r = 1…all admitted.
    pub fn bot_share_curve(&self) -> Vec<(f64, f64)> {
        let mut bots = 0u64;
        self.admission_order()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                bots += u64::from(p.kind == Kind::Bot);
                ((i + 1) as f64, bots as f64 / (i + 1) as f64)
            })
            .collect()
    }

    /// Cumulative places over the run's time, one line per side.
    pub fn places_over_time(&self, kind: Kind) -> Vec<(f64, f64)> {
        let mut t: Vec<f64> = self.of(kind).filter_map(|p| p.entered_s).collect();
        t.sort_by(f64::total_cmp);
        let mut out = vec![(0.0, 0.0)];
        out.extend(t.iter().enumerate().map(|(i, &s)| (s, (i + 1) as f64)));
        out
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A `CF-Connecting-IP` value's address group as the product names it (an
/// IPv6 address's /64); the value itself when it is not an address.
fn group_of(address: &str) -> String {
    ClientAddress::parse(address).map_or_else(|| address.to_string(), |a| a.as_str().to_string())
}

/// Distinct address groups counted as the product's draw, budget and
/// places cap count them: an IPv4 address (or anything not IPv6) is one;
/// an IPv6 /48's /64s count as `min(PER_48, Σ over its /56s of
/// min(PER_56, the /56's /64s))`. K /64s of one /48, each in a /56 of its
/// own, count as min(K, 16).
pub fn counted_addresses<'a>(addresses: impl IntoIterator<Item = &'a str>) -> u64 {
    let mut plain = BTreeSet::new();
    // /48 → /56 → its /64s.
    let mut wide: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for a in addresses {
        match ClientAddress::parse(a) {
            Some(g) => match g.wider() {
                Some((w56, w48)) => {
                    wide.entry(w48)
                        .or_default()
                        .entry(w56)
                        .or_default()
                        .insert(g.as_str().to_string());
                }
                None => {
                    plain.insert(g.as_str().to_string());
                }
            },
            None => {
                plain.insert(a.to_string());
            }
        }
    }
    let counted_48 = |n56: &BTreeMap<String, BTreeSet<String>>| {
        n56.values()
            .map(|n64| (n64.len() as u64).min(PER_56))
            .sum::<u64>()
            .min(PER_48)
    };
    plain.len() as u64 + wide.values().map(counted_48).sum::<u64>()
}

/// Ranks of `v`, 1-based, ties sharing their mean rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut out = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            out[k] = mean;
        }
        i = j + 1;
    }
    out
}

/// Spearman's ρ: Pearson's r of the ranks. None with fewer than two
/// values or a constant side.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = rx.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

impl fmt::Display for FarmReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (h, b) = (self.side(Kind::Human), self.side(Kind::Bot));
        let first = self.first_n().len();
        writeln!(f, "# queuegate-load --farm report: {}", self.label)?;
        writeln!(f, "machine: {}", self.machine)?;
        writeln!(f, "settings: {}", self.settings)?;
        writeln!(
            f,
            "run: {:.1} s · opening at {:.1} s · admitted reached N = {} at {} · drawn {} · places refused by the budget (stats) {} · Redis round trips {}",
            self.run_s,
            self.opens_at_s,
            self.humans,
            self.first_n_admitted_s
                .map_or_else(|| "never".to_string(), |s| format!("{s:.1} s")),
            self.drawn,
            self.refused_budget,
            self.round_trips,
        )?;
        let n = self.side(Kind::Nat);
        let nat = self.nat_humans > 0;
        let (all, all_counted) = self.all_addresses();
        writeln!(f, "\n## Who got in")?;
        if self.farm_ipv6 || b.counted_addresses != b.addresses {
            writeln!(
                f,
                "addresses: humans {} · NAT crowd {} · farm {} IPv6 /64s (counted as {}: the product counts a /56 as at most {PER_56} addresses and a /48 as at most {PER_48})",
                h.addresses, n.addresses, b.addresses, b.counted_addresses,
            )?;
            writeln!(
                f,
                "farm share of addresses, counted (as the product counts): {} / {} = {:.4} · naive (each /64 one address): {} / {} = {:.4}",
                b.counted_addresses,
                all_counted,
                self.bot_address_share(),
                b.addresses,
                all,
                self.bot_address_share_naive(),
            )?;
        } else {
            writeln!(
                f,
                "addresses: humans {}{} · farm {} → farm share of addresses {:.4}",
                h.addresses,
                if nat {
                    format!(" · NAT crowd {}", n.addresses)
                } else {
                    String::new()
                },
                b.addresses,
                self.bot_address_share()
            )?;
        }
        let nat_part = |a: u64, b: Option<u64>| {
            if !nat {
                return String::new();
            }
            match b {
                Some(b) => format!(" · NAT crowd {a} of {b}"),
                None => format!(" · NAT crowd {a}"),
            }
        };
        writeln!(
            f,
            "places before the opening: humans {} of {}{} · farm {} of {} → farm share of places {:.4}",
            h.pre_queued,
            h.identities,
            nat_part(n.pre_queued, Some(n.identities)),
            b.pre_queued,
            b.identities,
            self.bot_place_share()
        )?;
        writeln!(
            f,
            "placed after the opening: humans {}{} · farm {}",
            h.placed - h.pre_queued,
            nat_part(n.placed - n.pre_queued, None),
            b.placed - b.pre_queued
        )?;
        writeln!(
            f,
            "first {first} admitted: farm {} · humans {}{} → farm share {:.4} ({:.2}× its {}share of addresses; target ≤ 1.5×{})",
            b.first_n,
            h.first_n,
            nat_part(n.first_n, None),
            self.bot_first_n_share(),
            ratio_f(self.bot_first_n_share(), self.bot_address_share()),
            if self.farm_ipv6 { "counted " } else { "" },
            if self.farm_ipv6 {
                format!(
                    "; {:.2}× its naive share",
                    ratio_f(self.bot_first_n_share(), self.bot_address_share_naive())
                )
            } else {
                String::new()
            },
        )?;
        writeln!(
            f,
            "admitted by the end of the run: humans {}{} · farm {}",
            h.admitted,
            nat_part(n.admitted, None),
            b.admitted
        )?;
        writeln!(
            f,
            "humans refused (no place): {} · humans placed but dropped: {}",
            fmt_map(&self.humans_refused()),
            fmt_map(&self.humans_dropped())
        )?;
        if nat {
            writeln!(
                f,
                "NAT crowd ({} people behind one address): placed {} · admitted {} · among the first {first} admitted {} · Spearman ρ(arrival order, admission order) {} over {} admitted · refused (no place): {} · placed but dropped: {} · 429 too_many_entries {}",
                n.identities,
                n.placed,
                n.admitted,
                n.first_n,
                self.nat_rank_correlation()
                    .map_or_else(|| "n/a".to_string(), |r| format!("{r:.3}")),
                self.nat_ranks().len(),
                fmt_map(&self.refused(Kind::Nat)),
                fmt_map(&self.dropped(Kind::Nat)),
                n.too_many,
            )?;
        }

        writeln!(f, "\n## What each side spent")?;
        let mut spent = vec![("farm", &b), ("humans", &h)];
        if nat {
            spent.push(("NAT crowd", &n));
        }
        for (name, s) in spent {
            writeln!(
                f,
                "{name}: requests {} (challenge {} · enter {} · position {}) · 429 too_many_entries {} · solves {} · hashes {}",
                s.requests.total(),
                s.requests.challenge,
                s.requests.enter,
                s.requests.position,
                s.too_many,
                s.spend.solves,
                s.spend.hashes,
            )?;
        }
        let cpu_s = b.spend.cpu_ns as f64 / 1e9;
        writeln!(
            f,
            "farm solving: {cpu_s:.3} CPU-s measured (native solver, real solving; thread CPU time) · {:.3} CPU-s at {:.2} M hashes/s · per place {:.2} ms CPU · per admission among the first {first}: {:.1} requests, {:.2} ms CPU",
            b.spend.hashes as f64 / NATIVE_HASHES_PER_CPU_S,
            NATIVE_HASHES_PER_CPU_S / 1e6,
            ratio_f(cpu_s * 1e3, b.placed as f64),
            ratio_f(b.requests.total() as f64, b.first_n as f64),
            ratio_f(cpu_s * 1e3, b.first_n as f64),
        )?;
        let mut sim: Vec<f64> = self
            .parties
            .iter()
            .filter(|p| p.kind != Kind::Bot && p.spend.solves > 0)
            .map(|p| p.spend.simulated_ms as f64)
            .collect();
        sim.sort_by(f64::total_cmp);
        writeln!(
            f,
            "humans' solving at the page's speed (simulated, sleep): p50 {:.0} ms · p95 {:.0} ms · total {:.1} s over {} humans",
            percentile(&sim, 50.0),
            percentile(&sim, 95.0),
            (h.spend.simulated_ms + n.spend.simulated_ms) as f64 / 1e3,
            sim.len()
        )?;
        let errors: u64 = self.parties.iter().map(|p| p.errors).sum();
        writeln!(f, "request errors (no reply, 5xx, not JSON): {errors}")?;
        Ok(())
    }
}

fn ratio_f(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

fn fmt_map(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Writes `load-farm-<label>.svg` into `dir`: places over time by side
/// (left), the farm's share of the first r admitted against its share of
/// addresses (counted, and naive for an IPv6 farm) and of places
/// (middle), and with a NAT crowd its arrival rank against its admission
/// rank, titled with Spearman's ρ (right). Its path.
pub fn write_chart(report: &FarmReport, dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join(format!("load-farm-{}.svg", report.label));
    draw(report, &path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(path)
}

fn draw(report: &FarmReport, path: &Path) -> chart::DrawResult {
    const HUMANS: RGBColor = PALETTE[0];
    const FARM: RGBColor = PALETTE[1];
    const NAT: RGBColor = PALETTE[2];
    const MARK: RGBColor = RGBColor(0x99, 0x99, 0x99);
    let panels = if report.nat_humans > 0 { 3 } else { 2 };
    let root = chart::canvas(path, (540 * panels, 440))?;
    let areas = root.split_evenly((1, panels as usize));
    let (left, right) = (&areas[0], &areas[1]);

    let humans = report.places_over_time(Kind::Human);
    let farm = report.places_over_time(Kind::Bot);
    let nat = report.places_over_time(Kind::Nat);
    let x_max = humans
        .iter()
        .chain(&farm)
        .chain(&nat)
        .map(|p| p.0)
        .fold(report.opens_at_s, f64::max)
        * 1.05;
    let y_max = humans
        .iter()
        .chain(&farm)
        .chain(&nat)
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.15;
    let mut c =
        chart::axes(left, "Places taken", 18, 56).build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart::mesh(&mut c, "seconds since the start", "places (cumulative)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    c.draw_series(DashedLineSeries::new(
        [(report.opens_at_s, 0.0), (report.opens_at_s, y_max)],
        6,
        4,
        MARK.stroke_width(2),
    ))?
    .label("opening")
    .legend(chart::swatch(MARK));
    let mut lines = vec![
        (
            if report.farm_ipv6 {
                format!("farm ({} IPv6 /64s of one /48)", report.farm_addresses)
            } else {
                format!("farm ({} addresses)", report.farm_addresses)
            },
            FARM,
            &farm,
        ),
        (
            format!("humans ({} addresses)", report.humans),
            HUMANS,
            &humans,
        ),
    ];
    if report.nat_humans > 0 {
        lines.push((
            format!("NAT crowd ({} behind one address)", report.nat_humans),
            NAT,
            &nat,
        ));
    }
    for (label, color, pts) in lines {
        c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(label)
            .legend(chart::swatch(color));
    }
    chart::legend(&mut c, SeriesLabelPosition::UpperLeft)?;

    let curve = report.bot_share_curve();
    let x_max = (curve.len() as f64).max(report.humans as f64).max(1.0) * 1.02;
    let mut c = chart::axes(right, "Farm's share of the first r admitted", 18, 56)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)?;
    chart::mesh(&mut c, "r (admission order)", "farm's share")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .draw()?;
    let mut marks = vec![("farm's share of places", report.bot_place_share(), FARM)];
    if report.farm_ipv6 {
        marks.push((
            "… of addresses, naive (a /64 one)",
            report.bot_address_share_naive(),
            MARK,
        ));
        marks.push((
            "… of addresses, counted (a /48 ≤ 16)",
            report.bot_address_share(),
            HUMANS,
        ));
    } else {
        marks.push((
            "farm's share of addresses",
            report.bot_address_share(),
            HUMANS,
        ));
    }
    for (label, value, color) in marks {
        c.draw_series(DashedLineSeries::new(
            [(0.0, value), (x_max, value)],
            8,
            5,
            color.stroke_width(1),
        ))?
        .label(format!("{label} ({value:.3})"))
        .legend(chart::swatch(color));
    }
    let n = report.humans as f64;
    c.draw_series(DashedLineSeries::new(
        [(n, 0.0), (n, 1.0)],
        6,
        4,
        MARK.stroke_width(2),
    ))?
    .label(format!("r = N = {}", report.humans))
    .legend(chart::swatch(MARK));
    let first = report.bot_first_n_share();
    c.draw_series(LineSeries::new(curve.iter().copied(), FARM.stroke_width(2)))?
        .label(format!(
            "farm's share of the first r (r = N: {first:.3}, {:.2}×)",
            ratio_f(first, report.bot_address_share())
        ))
        .legend(chart::swatch(FARM));
    chart::legend(&mut c, SeriesLabelPosition::LowerRight)?;

    if let Some(area) = areas.get(2) {
        let ranks = report.nat_ranks();
        let m = (ranks.len() as f64).max(1.0) + 1.0;
        let rho = report
            .nat_rank_correlation()
            .map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}"));
        let title = format!("NAT crowd: arrival vs admission (ρ = {rho})");
        let mut c = chart::axes(area, &title, 18, 56).build_cartesian_2d(0.0..m, 0.0..m)?;
        chart::mesh(
            &mut c,
            "arrival rank (their enter)",
            "admission rank (among them)",
        )
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
        c.draw_series(DashedLineSeries::new(
            [(0.0, 0.0), (m, m)],
            6,
            4,
            MARK.stroke_width(1),
        ))?
        .label("admitted in arrival order (ρ = 1)")
        .legend(chart::swatch(MARK));
        c.draw_series(
            ranks
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, NAT.filled())),
        )?
        .label(format!(
            "{} of {} admitted, {} among the first {}",
            ranks.len(),
            report.nat_humans,
            report.side(Kind::Nat).first_n,
            report.humans
        ))
        .legend(chart::swatch(NAT));
        chart::legend(&mut c, SeriesLabelPosition::UpperLeft)?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn party(kind: Kind, address: &str, pre: bool, issued: Option<u64>, ticket: u64) -> Party {
        let mut p = Party::new(kind, address.into());
        p.entered_ms = Some(1);
        p.entered_s = Some(1.0);
        p.pre_queued = pre;
        p.issued_ms = issued;
        p.ticket = Some(ticket);
        p.requests = Requests {
            challenge: 1,
            enter: 2,
            position: 3,
        };
        p.spend = Spend {
            solves: 1,
            hashes: 1_000,
            cpu_ns: 1_000_000,
            simulated_ms: if kind == Kind::Human { 500 } else { 0 },
        };
        p
    }

    /// 4 humans (one refused), 2 farm addresses × 3 identities; the first
    /// N = 4 admitted by tick then ticket: farm, human, farm, farm.
    fn report() -> FarmReport {
        let mut refused = Party::new(Kind::Human, "198.18.0.4".into());
        refused.refused = Some("queue_full".into());
        refused.requests.enter = 1;
        let parties = vec![
            party(Kind::Human, "198.18.0.1", true, Some(100), 5),
            party(Kind::Human, "198.18.0.2", true, Some(200), 9),
            party(Kind::Human, "198.18.0.3", true, None, 12),
            refused,
            party(Kind::Bot, "198.19.0.1", true, Some(100), 2),
            party(Kind::Bot, "198.19.0.1", true, Some(100), 7),
            party(Kind::Bot, "198.19.0.1", true, None, 11),
            party(Kind::Bot, "198.19.0.2", true, Some(200), 8),
            party(Kind::Bot, "198.19.0.2", true, Some(300), 10),
            party(Kind::Bot, "198.19.0.2", false, None, 13),
        ];
        FarmReport {
            machine: "test".into(),
            settings: "test".into(),
            label: "test".into(),
            humans: 4,
            farm_addresses: 2,
            identities_per_address: 3,
            farm_ipv6: false,
            nat_humans: 0,
            opens_at_s: 2.0,
            first_n_admitted_s: Some(3.0),
            run_s: 4.0,
            drawn: 8,
            refused_budget: 0,
            round_trips: 0,
            parties,
        }
    }

    #[test]
    fn the_first_n_follow_ticks_then_tickets() {
        let r = report();
        let order: Vec<(Kind, Option<u64>)> =
            r.first_n().iter().map(|p| (p.kind, p.ticket)).collect();
        assert_eq!(
            order,
            vec![
                (Kind::Bot, Some(2)),
                (Kind::Human, Some(5)),
                (Kind::Bot, Some(7)),
                (Kind::Bot, Some(8)),
            ]
        );
        assert_eq!(r.admission_order().len(), 6);
    }

    #[test]
    fn shares_and_counts_add_up() {
        let r = report();
        let (h, b) = (r.side(Kind::Human), r.side(Kind::Bot));
        assert_eq!(
            (h.identities, h.addresses, h.placed, h.pre_queued),
            (4, 4, 3, 3)
        );
        assert_eq!(
            (b.identities, b.addresses, b.placed, b.pre_queued),
            (6, 2, 6, 5)
        );
        assert_eq!((h.first_n, b.first_n), (1, 3));
        assert_eq!((h.admitted, b.admitted), (2, 4));
        assert!((r.bot_address_share() - 2.0 / 6.0).abs() < 1e-12);
        assert!((r.bot_place_share() - 5.0 / 8.0).abs() < 1e-12);
        assert!((r.bot_first_n_share() - 0.75).abs() < 1e-12);
        assert_eq!(
            r.humans_refused(),
            BTreeMap::from([("queue_full".into(), 1)])
        );
        assert_eq!(b.requests.total(), 36);
        assert_eq!(
            (b.spend.solves, b.spend.hashes, b.spend.cpu_ns),
            (6, 6_000, 6_000_000)
        );
        let curve = r.bot_share_curve();
        assert_eq!(curve[0], (1.0, 1.0));
        assert_eq!(curve[3], (4.0, 0.75));
        let text = r.to_string();
        assert!(
            text.contains("first 4 admitted: farm 3 · humans 1 → farm share 0.7500"),
            "{text}"
        );
        assert!(
            text.contains("humans refused (no place): queue_full 1"),
            "{text}"
        );
        assert!(
            text.contains("farm solving: 0.006 CPU-s measured")
                && text.contains("per place 1.00 ms CPU"),
            "{text}"
        );
    }

    #[test]
    fn the_chart_is_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write_chart(&report(), dir.path()).expect("chart");
        assert!(path.ends_with("load-farm-test.svg"));
        let svg = std::fs::read_to_string(path).expect("written");
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
        let path = write_chart(&wide_report(), dir.path()).expect("chart");
        let svg = std::fs::read_to_string(path).expect("written");
        assert!(svg.contains("NAT crowd: arrival vs admission"), "{svg}");
    }

    #[test]
    fn a_48_counts_as_at_most_16_and_a_56_as_at_most_4() {
        let v6 = |h: u16| format!("2001:db8:ff00:{h:x}::1");
        // 40 /64s, each in a /56 of its own: 16.
        let spread: Vec<String> = (0..40u16).map(|k| v6(k << 8)).collect();
        assert_eq!(counted_addresses(spread.iter().map(String::as_str)), 16);
        // 3 of them: 3.
        assert_eq!(counted_addresses(spread[..3].iter().map(String::as_str)), 3);
        // 10 /64s of one /56: 4; the same /64 twice (another host): once.
        let one_56: Vec<String> = (0..10u16).map(|k| v6(0x1200 | k)).collect();
        assert_eq!(counted_addresses(one_56.iter().map(String::as_str)), 4);
        assert_eq!(
            counted_addresses(["2001:db8:ff00:1::1", "2001:db8:ff00:1::2"]),
            1
        );
        // IPv4 addresses one each; another /48 counts apart.
        assert_eq!(
            counted_addresses(spread.iter().map(String::as_str).chain([
                "198.18.0.1",
                "198.18.0.2",
                "2001:db8:1::1"
            ])),
            16 + 2 + 1
        );
    }

    #[test]
    fn spearman_of_ranks() {
        let up: Vec<f64> = (0..10).map(f64::from).collect();
        let down: Vec<f64> = up.iter().rev().copied().collect();
        assert!((spearman(&up, &up).unwrap() - 1.0).abs() < 1e-12);
        assert!((spearman(&up, &down).unwrap() + 1.0).abs() < 1e-12);
        // Monotone, not linear: still 1.
        let cubes: Vec<f64> = up.iter().map(|x| x * x * x).collect();
        assert!((spearman(&up, &cubes).unwrap() - 1.0).abs() < 1e-12);
        // Ties share their mean rank.
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
        assert_eq!(spearman(&[1.0], &[1.0]), None);
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
    }

    /// 3 humans, a NAT crowd of 4 (admitted in reverse order of arrival),
    /// a farm of 20 /64s of one /48 × 1.
    fn wide_report() -> FarmReport {
        let mut parties = vec![
            party(Kind::Human, "198.18.0.1", true, Some(100), 1),
            party(Kind::Human, "198.18.0.2", true, Some(100), 2),
            party(Kind::Human, "198.18.0.3", true, Some(200), 30),
        ];
        for j in 0..4u64 {
            let mut p = party(Kind::Nat, "198.18.255.254", true, Some(300 + j), 0);
            p.entered_ms = Some(1_000 - j);
            parties.push(p);
        }
        for k in 0..20u64 {
            let address = format!("2001:db8:ff00:{:x}::1", k << 8);
            parties.push(party(Kind::Bot, &address, true, Some(100), 3 + k));
        }
        FarmReport {
            humans: 3,
            farm_addresses: 20,
            identities_per_address: 1,
            farm_ipv6: true,
            nat_humans: 4,
            parties,
            ..report()
        }
    }

    #[test]
    fn an_ipv6_farm_and_a_nat_crowd_are_counted_as_the_product_counts() {
        let r = wide_report();
        let (b, n) = (r.side(Kind::Bot), r.side(Kind::Nat));
        assert_eq!((b.addresses, b.counted_addresses), (20, 16));
        assert_eq!((n.identities, n.addresses, n.counted_addresses), (4, 1, 1));
        // Counted: 16 / (3 + 1 + 16); naive: 20 / (3 + 1 + 20).
        assert!((r.bot_address_share() - 16.0 / 20.0).abs() < 1e-12);
        assert!((r.bot_address_share_naive() - 20.0 / 24.0).abs() < 1e-12);
        // The first 3 admitted: two humans (tick 100, tickets 1, 2), then
        // the farm's ticket 3.
        assert_eq!(
            (r.side(Kind::Human).first_n, b.first_n, n.first_n),
            (2, 1, 0)
        );
        // Admitted in the reverse of their arrival: ρ = −1.
        assert!((r.nat_rank_correlation().unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(r.nat_ranks()[0], (4.0, 1.0));
        let text = r.to_string();
        assert!(
            text.contains("farm share of addresses, counted (as the product counts): 16 / 20 = 0.8000 · naive (each /64 one address): 20 / 24 = 0.8333"),
            "{text}"
        );
        assert!(
            text.contains("Spearman ρ(arrival order, admission order) -1.000 over 4 admitted"),
            "{text}"
        );
        assert!(text.contains("among the first 3 admitted 0"), "{text}");
    }
}
