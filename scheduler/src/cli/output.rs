//! What the operator commands print: each action's [`Done`] as text, or
//! as JSON for the commands that take `--json`.

use queuegate_shared::fields::stats as sf;

use crate::actions::{Done, QueueStatus, SettingsView, VisitorView};

/// Prints what an action on `queue` did.
pub(super) fn print(done: Done, queue: &str, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&done).unwrap_or_default()
        );
        return;
    }
    match done {
        Done::Status(all) => {
            for s in &all {
                print!("{}", render(s));
            }
        }
        Done::Switched(s) if s.changed => {
            println!("queue {}: {} (was {})", s.queue, s.state, s.previous)
        }
        Done::Switched(s) => println!("queue {}: already {}", s.queue, s.state),
        Done::Schedule(now) => {
            let show = |t: &Option<String>| t.clone().unwrap_or_else(|| "none".into());
            println!(
                "queue {}: opens at {} · closes at {}",
                now.queue,
                show(&now.opens_at),
                show(&now.closes_at)
            );
            if let Some(b) = &now.beacon {
                println!(
                    "queue {}: the draw mixes in beacon {} round {} (the first after the opening)",
                    now.queue, b.source, b.round
                );
            }
            if let Some(w) = now.warning {
                eprintln!("warning: {w}");
            }
        }
        Done::Reset(r) => println!(
            "queue {}: reset, {} keys removed{}",
            r.queue,
            r.removed_keys,
            if r.tokens_dropped > 0 {
                format!(", {} tokens in flight dropped", r.tokens_dropped)
            } else {
                String::new()
            }
        ),
        Done::Notice(now) => {
            let langs = |texts: &std::collections::BTreeMap<String, String>| {
                texts
                    .iter()
                    .map(|(l, t)| format!(", {l}: {t:?}"))
                    .collect::<String>()
            };
            let was = now.previous.as_ref().map_or("none".to_string(), |p| {
                format!("{p:?}{}", langs(&now.previous_texts))
            });
            match &now.notice {
                Some(t) => println!(
                    "queue {}: notice {t:?}{} (was {was})",
                    now.queue,
                    langs(&now.texts)
                ),
                None => println!("queue {}: notice cleared (was {was})", now.queue),
            }
        }
        Done::Stock(s) => print!("{}", render_stock(&s)),
        Done::Settings(v) => print!("{}", render_settings(&v)),
        Done::Visitor(v) => print!("{}", render_visitor(&v)),
        Done::Revoked(r) => println!(
            "visitor {} of queue {} revoked (was {}); kept out for {}",
            r.user,
            r.queue,
            r.was,
            minutes_text(r.for_ms)
        ),
        Done::Lifted(l) => println!(
            "visitor {} of queue {}: revocation lifted; they may enter again",
            l.user, l.queue
        ),
        Done::BypassCreated(b) => {
            println!(
                "bypass {} for {:?} on queue {}, until {}",
                b.id, b.name, b.queue, b.expires_at
            );
            println!("open on the shop's site (shown once; only its hash is kept):");
            println!("  {}", b.link);
        }
        Done::Bypasses(all) if all.is_empty() => println!("queue {queue}: no bypass links"),
        Done::Bypasses(all) => {
            for b in &all {
                println!(
                    "{}  {:<8} {:>6} uses  until {}  {}",
                    b.id, b.status, b.uses, b.expires_at, b.name
                );
            }
        }
        Done::BypassRevoked(r) => {
            println!("queue {}: bypass {} ({:?}) revoked", r.queue, r.id, r.name)
        }
    }
}

fn render(s: &QueueStatus) -> String {
    let stat = |k: &str| s.stats.get(k).copied().unwrap_or(0);
    let max = s.max_active.map_or("?".to_string(), |m| m.to_string());
    let rate = s
        .admitted_per_second
        .map_or("no measurement yet".to_string(), |r| format!("{r:.1}"));
    let lease = match (&s.lease_holder, s.lease_ttl_ms) {
        (Some(h), Some(ttl)) => format!("{h} (expires in {:.1} s)", ttl as f64 / 1000.0),
        _ => "none: no scheduler holds this queue".to_string(),
    };
    let none = || "none".to_string();
    format!(
        "queue {}\n  state       {}\n  schedule    opens {} · closes {}\n  pre-queue   {} (drawing: {} left)\n  draw        {}\n  waiting     {} (and {} claims: passed over asleep)\n  active      {} / {max}\n  admitted/s  {rate}\n  lease       {lease}\n  file        {}\n  origin      {}\n  totals      entered {} · admitted {} (passed at once {}) · abandoned {} · expired {} · ordered {} · lapsed {}\n  refused     budget {} · no challenge {} · reused {} · stale {} · turnstile {}\n",
        s.queue,
        s.state.as_deref().unwrap_or("unconfigured (no scheduler has published settings)"),
        s.opens_at.clone().unwrap_or_else(none),
        s.closes_at.clone().unwrap_or_else(none),
        s.pre_queued,
        s.drawing,
        s.draw.line(),
        s.waiting,
        s.claims,
        s.active,
        s.file.line(),
        s.origin.line(),
        stat(sf::ENTERED),
        stat(sf::ADMITTED),
        stat(sf::PASSED),
        stat(sf::ABANDONED),
        stat(sf::EXPIRED),
        stat(sf::ORDERED),
        stat(sf::LAPSED),
        stat(sf::REFUSED_BUDGET),
        stat(sf::REFUSED_CHALLENGE),
        stat(sf::REFUSED_REUSED),
        stat(sf::REFUSED_STALE),
        stat(sf::REFUSED_TURNSTILE),
    ) + &bypassed(s)
        + &s.stock_left.map_or(String::new(), |left| {
            format!(
                "  stock       {left} left{} · {} sold\n",
                if left == 0 { " (sold out)" } else { "" },
                s.stock_sold.unwrap_or(0)
            )
        })
        + &s
            .notice
            .as_ref()
            .map_or(String::new(), |n| format!("  notice      {n:?}\n"))
        + &s
            .notice_texts
            .iter()
            .map(|(lang, t)| format!("    {lang:<9} {t:?}\n"))
            .collect::<String>()
}

fn render_visitor(v: &VisitorView) -> String {
    let mut out = format!(
        "visitor {} in queue {}\n  state       {}\n",
        v.user, v.queue, v.state
    );
    if let (Some(p), Some(t)) = (v.position, v.ticket) {
        out.push_str(&format!("  position    {p} (ticket {t})\n"));
    }
    if let Some(until) = &v.slot_until {
        out.push_str(&format!("  slot        held until {until}\n"));
    }
    if let Some(t) = &v.token {
        out.push_str(&format!(
            "  token       usable {} to {} (restored {}×)\n",
            t.activates_at, t.expires_at, t.restores
        ));
    }
    if let Some(c) = &v.last_change {
        out.push_str(&format!("  last change {} at {}\n", c.status, c.at));
    }
    for (i, c) in v.history.iter().enumerate() {
        let label = if i == 0 { "history" } else { "" };
        out.push_str(&format!("  {label:<11} {} at {}\n", c.status, c.at));
    }
    out
}

fn render_settings(v: &SettingsView) -> String {
    let applied = match v.applied_version {
        Some(a) if a == v.version => "in force".to_string(),
        Some(a) => format!("the lease holder applied version {a} so far"),
        None if v.version == 0 => "none set".to_string(),
        None => "not applied by a lease holder yet".to_string(),
    };
    let mut out = format!(
        "queue {} settings (run-time version {}: {applied})\n",
        v.queue, v.version
    );
    match (v.holder.outcome, &v.holder.reason) {
        ("refused", Some(why)) => out.push_str(&format!(
            "  the lease holder REFUSED version {} with its config file: {why}\n",
            v.version
        )),
        ("pending", _) if v.version > 0 => out.push_str(
            "  the lease holder has not applied it yet (none holds the lease, or it did not answer within 3 s)\n",
        ),
        _ => {}
    }
    let effective = serde_json::to_value(&v.effective).unwrap_or_default();
    let file = serde_json::to_value(&v.file).unwrap_or_default();
    for (name, value) in effective.as_object().into_iter().flatten() {
        let from = if v.runtime.contains_key(name) {
            format!("run time (file: {})", file[name])
        } else {
            "file".to_string()
        };
        out.push_str(&format!("  {name:<32} {value:<12} {from}\n"));
    }
    out
}

/// `90 min`, `1.5 s`: a duration for people.
fn minutes_text(ms: u64) -> String {
    if ms.is_multiple_of(60_000) {
        format!("{} min", ms / 60_000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// `  bypassed    N requests` when bypass links passed any, and
/// `  revoked     N visitors` when operators revoked any.
fn bypassed(s: &QueueStatus) -> String {
    let mut out = String::new();
    if let Some(n) = s.stats.get(sf::BYPASSED).copied().filter(|n| *n > 0) {
        out.push_str(&format!("  bypassed    {n} requests (bypass links)\n"));
    }
    if let Some(n) = s.stats.get(sf::REVOKED).copied().filter(|n| *n > 0) {
        let withdrawn = s.stats.get(sf::WITHDRAWN).copied().unwrap_or(0);
        out.push_str(&format!(
            "  revoked     {n} visitors ({withdrawn} places withdrawn)\n"
        ));
    }
    out
}

/// A queue's stock, as `stock` shows it.
fn render_stock(s: &crate::actions::StockNow) -> String {
    let st = &s.stock;
    let Some(left) = st.left else {
        return format!("queue {}: no stock kept\n", s.queue);
    };
    let per_mille = |v: u64| format!("{:.1} %", v as f64 / 10.0);
    format!(
        "queue {}: {left} units left{}, {} sold, {} held by orders in flight\n\
         overbooking: {} in force ({}); conversion {}, {} units per order; {} turns out\n",
        s.queue,
        if s.sold_out { " (sold out)" } else { "" },
        st.sold,
        st.held,
        per_mille(st.margin_per_mille),
        st.overbook_percent
            .map_or("measured".to_string(), |p| format!("set to {p} %")),
        st.conversion_per_mille
            .map_or("not measured yet".to_string(), per_mille),
        st.units_per_order_per_mille
            .map_or("-".to_string(), |u| format!("{:.2}", u as f64 / 1000.0)),
        st.turns_out,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::OriginStatus;
    use std::collections::BTreeMap;

    #[test]
    fn status_reads_like_a_report() {
        let s = QueueStatus {
            queue: "main".into(),
            state: Some("open".into()),
            waiting: 1204,
            active: 56,
            max_active: Some(1000),
            admitted_per_second: Some(174.96),
            lease_holder: Some("vm1/42/ab12cd34".into()),
            lease_ttl_ms: Some(1800),
            opens_at: Some("2026-12-03T14:00:00Z".into()),
            closes_at: None,
            pre_queued: 0,
            drawing: 0,
            claims: 3,
            origin: OriginStatus::of(&BTreeMap::from([
                ("target_rate".into(), "87.500".into()),
                ("admit_rate_per_second".into(), "175.0".into()),
                ("min_admit_rate_per_second".into(), "1.0".into()),
                ("origin_error_share".into(), "0.420".into()),
                ("origin_p95_ms".into(), "120.000".into()),
            ])),
            stats: BTreeMap::from([("entered".into(), 5000), ("admitted".into(), 3796)]),
            notice: Some("S and M sold out".into()),
            notice_texts: BTreeMap::from([("de".into(), "S und M ausverkauft".into())]),
            schedule_version: 2,
            file: crate::actions::FileStatus::new(Some("aa11".into()), "bb22".into()),
            stock_left: Some(0),
            stock_sold: Some(10_000),
            draw: crate::actions::DrawStatus::default(),
        };
        let text = render(&s);
        assert!(
            text.contains("  stock       0 left (sold out) · 10000 sold\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "  notice      \"S and M sold out\"\n    de        \"S und M ausverkauft\"\n"
            ),
            "{text}"
        );
        assert!(text.contains("active      56 / 1000"), "{text}");
        assert!(
            text.contains("waiting     1204 (and 3 claims: passed over asleep)"),
            "{text}"
        );
        assert!(text.contains("admitted/s  175.0"), "{text}");
        assert!(
            text.contains("vm1/42/ab12cd34 (expires in 1.8 s)"),
            "{text}"
        );
        assert!(text.contains("entered 5000 · admitted 3796"), "{text}");
        assert!(
            text.contains("file        aa11 published · this file bb22 DIFFERS"),
            "{text}"
        );
        assert!(
            text.contains("schedule    opens 2026-12-03T14:00:00Z · closes none"),
            "{text}"
        );
        assert!(
            text.contains(
                "origin      target 87.5/s (min 1.0, max 175.0) · errors 42.0 % · p95 120 ms"
            ),
            "{text}"
        );
        assert!(
            text.contains("refused     budget 0 · no challenge 0"),
            "{text}"
        );
    }
}
