//! `queuegate-verify`: checks a draw's public record (the seed opens the
//! commitment, the leaves give the root, the recomputed permutation keeps
//! the rounds), a visitor's receipt against it, and, for an auditor with
//! read access to Redis, that the live line holds every drawn visitor on
//! the ticket the draw gives it (docs/drop-day.md, *A draw anyone can
//! verify*), and the beacon value it mixes in against the beacon's round.
//! Every check of the record is `queuegate_shared::draw_proof`'s.

use std::collections::HashMap;

use queuegate_shared::beacon::{BeaconRound, RoundValue};
use queuegate_shared::draw_proof::{
    leaf, parse_hash, salt, DrawRecord, Hash, LeafPage, Receipt, VerifyError,
};
use queuegate_shared::fields::commit as dc;
use queuegate_shared::{Prefix, QueueId, QueueKeys};

/// Why a verification did not pass.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The record, a receipt or the line disagrees with the draw.
    #[error("{0}")]
    Mismatch(String),
    /// The check could not run (network, Redis, input).
    #[error("{0}")]
    Unable(String),
}

impl From<VerifyError> for Failure {
    fn from(e: VerifyError) -> Self {
        Failure::Mismatch(e.to_string())
    }
}

impl Failure {
    /// 1 for a mismatch, 2 when the check could not run.
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Mismatch(_) => 1,
            Failure::Unable(_) => 2,
        }
    }
}

fn unable(e: impl std::fmt::Display) -> Failure {
    Failure::Unable(e.to_string())
}

/// A record fetched and checked: its places by leaf index.
#[derive(Debug)]
pub struct Checked {
    /// The record.
    pub record: DrawRecord,
    /// Its leaves, by index.
    pub leaves: Vec<Hash>,
    /// The place (0-based) the draw gives each index.
    pub places: Vec<u64>,
}

/// Fetches the record of `queue` (draw `draw`, or the latest) and its
/// pages from the room at `url`, and checks it whole.
pub async fn fetch_and_check(
    url: &str,
    queue: &str,
    draw: Option<u64>,
) -> Result<Checked, Failure> {
    let base = url.trim_end_matches('/');
    let client = reqwest::Client::new();
    let mut head_url = format!("{base}/queue/draw?queue={queue}");
    if let Some(n) = draw {
        head_url.push_str(&format!("&draw={n}"));
    }
    let head: serde_json::Value = get_json(&client, &head_url).await?;
    if head.get("seed").is_none() {
        return Err(Failure::Unable(format!(
            "the draw is not revealed yet (commitment {})",
            head.get("commitment").unwrap_or(&serde_json::Value::Null)
        )));
    }
    let record: DrawRecord =
        serde_json::from_value(head).map_err(|e| Failure::Mismatch(format!("the record: {e}")))?;
    record.check_header()?;
    let mut leaves = Vec::with_capacity(record.registrants as usize);
    for k in 0..record.pages {
        let path = record.leaves.replace("{page}", &k.to_string());
        let page: LeafPage =
            serde_json::from_value(get_json(&client, &format!("{base}{path}")).await?)
                .map_err(|e| Failure::Mismatch(format!("page {k}: {e}")))?;
        if page.draw != record.draw || page.page != k || page.from != leaves.len() as u64 {
            return Err(Failure::Mismatch(format!(
                "page {k} is page {} of draw {} from {}",
                page.page, page.draw, page.from
            )));
        }
        for l in &page.leaves {
            leaves.push(parse_hash("leaf", l)?);
        }
    }
    let places = record.check(&leaves)?;
    Ok(Checked {
        record,
        leaves,
        places,
    })
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<serde_json::Value, Failure> {
    let resp = client.get(url).send().await.map_err(unable)?;
    let status = resp.status();
    let text = resp.text().await.map_err(unable)?;
    if !status.is_success() {
        return Err(Failure::Unable(format!("GET {url}: {status} {text}")));
    }
    serde_json::from_str(&text).map_err(|e| Failure::Unable(format!("GET {url}: {e}")))
}

/// Checks the record's beacon value against the round it names, read from
/// the drand endpoint `beacon_url` (the record names the chain): the
/// round. A record that mixes in no beacon fails: it was asked for one.
pub async fn check_beacon(beacon_url: &str, record: &DrawRecord) -> Result<u64, Failure> {
    let Some(b) = &record.beacon else {
        return Err(Failure::Mismatch(
            "the record mixes in no beacon (--beacon-url asks to check one)".into(),
        ));
    };
    let named = BeaconRound {
        source: b.source.clone(),
        round: b.round,
    }
    .at(beacon_url);
    let client = reqwest::Client::new();
    let reply = get_json(&client, &named.url()).await?;
    let published: RoundValue = serde_json::from_value(reply)
        .map_err(|e| Failure::Unable(format!("GET {}: {e}", named.url())))?;
    let Some(value) = published.value_of(b.round) else {
        return Err(Failure::Unable(format!(
            "GET {}: not round {}'s randomness",
            named.url(),
            b.round
        )));
    };
    if !value.eq_ignore_ascii_case(&b.value) {
        return Err(Failure::Mismatch(format!(
            "the record's beacon value {} is not round {}'s randomness {value}",
            b.value, b.round
        )));
    }
    Ok(b.round)
}

/// A receipt from its JSON: the receipt itself, or a position reply that
/// carries one.
pub fn parse_receipt(text: &str) -> Result<Receipt, Failure> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| Failure::Unable(format!("the receipt: {e}")))?;
    let v = v.get("receipt").cloned().unwrap_or(v);
    serde_json::from_value(v).map_err(|e| Failure::Unable(format!("the receipt: {e}")))
}

/// What the live line showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineChecked {
    /// Drawn visitors found in line, each on its drawn ticket or (see
    /// `dealt`) on one the deal among its address's identities may give.
    pub in_line: u64,
    /// Of those, visitors on a seat the deal after the seal may have moved
    /// (docs/drop-day.md, *Fairness per address*): an address group with
    /// several identities had its seats dealt among them in an order the
    /// record cannot show (it holds no groups), so such a visitor is
    /// accepted on any seat the deal may have moved, never on another.
    pub dealt: u64,
}

/// Checks that every visitor in `waiting` on one of the draw's tickets is
/// a registrant on the ticket the draw gives it (visitors who left or
/// were admitted are simply absent).
pub async fn check_line(
    redis_url: &str,
    prefix: &str,
    checked: &Checked,
) -> Result<LineChecked, Failure> {
    let r = &checked.record;
    let keys = QueueKeys::new(
        &Prefix::new(prefix).map_err(unable)?,
        &QueueId::new(&r.queue).map_err(unable)?,
    );
    let client = redis::Client::open(redis_url).map_err(unable)?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(unable)?;
    let salt_key: Option<String> = redis::cmd("HGET")
        .arg(keys.draw_record(r.draw))
        .arg(dc::SALT_KEY)
        .query_async(&mut conn)
        .await
        .map_err(unable)?;
    let salt_key = parse_hash(
        "salt key",
        &salt_key.ok_or_else(|| Failure::Unable(format!("draw {} has no record", r.draw)))?,
    )?;
    let line: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
        .arg(keys.waiting())
        .arg(format!("({}", r.ticket_base))
        .arg(r.ticket_base + r.registrants)
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await
        .map_err(unable)?;
    let index: HashMap<Hash, u64> = checked
        .leaves
        .iter()
        .enumerate()
        .map(|(i, l)| (*l, i as u64))
        .collect();
    let movable = dealt_seats(&mut conn, &keys, r).await?;
    // Which leaf the draw gives each place.
    let mut of_place = vec![0u64; checked.places.len()];
    for (i, p) in checked.places.iter().enumerate() {
        if let Some(slot) = of_place.get_mut(*p as usize) {
            *slot = i as u64;
        }
    }
    let mut dealt = 0;
    for (user, score) in &line {
        let ticket = *score as u64;
        let Some(&i) = index.get(&leaf(&salt(&salt_key, user), user)) else {
            return Err(Failure::Mismatch(format!(
                "ticket {ticket} in line is held by a visitor who is not a registrant"
            )));
        };
        let drawn = r.ticket_base + 1 + checked.places[i as usize];
        if drawn == ticket {
            continue;
        }
        // The deal moves a visitor only onto a seat of its own address's
        // identities: both ends must be seats the deal may have moved.
        let held_place = ticket - r.ticket_base - 1;
        let other = of_place.get(held_place as usize).copied();
        let may = |leaf: u64| movable.as_ref().is_some_and(|m| m(leaf));
        if may(i) && other.is_some_and(may) {
            dealt += 1;
            continue;
        }
        return Err(Failure::Mismatch(format!(
            "the registrant of leaf {i} holds ticket {ticket}; the draw gives it ticket {drawn} (place {})",
            drawn - r.ticket_base
        )));
    }
    Ok(LineChecked {
        in_line: line.len() as u64,
        dealt,
    })
}

/// Whether the draw's seats were dealt among address groups' identities
/// after the seal, and if so which leaves the deal may have moved: those
/// of round 2 and later (only an address with several identities has
/// them) and the round-1 seats `draw_moved` lists. None: not dealt, so
/// every visitor must be on its own drawn ticket.
async fn dealt_seats(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &QueueKeys,
    r: &DrawRecord,
) -> Result<Option<impl Fn(u64) -> bool>, Failure> {
    use queuegate_shared::draw::{slot_of_rank, MovedSeats};
    use queuegate_shared::fields::{config as cf, DRAW_SHUFFLE_DEALT};
    let (shuffle, number): (Option<String>, Option<u64>) = redis::cmd("HMGET")
        .arg(keys.config())
        .arg(cf::DRAW_SHUFFLE)
        .arg(cf::DRAW_NUMBER)
        .query_async(conn)
        .await
        .map_err(unable)?;
    if shuffle.as_deref() != Some(DRAW_SHUFFLE_DEALT) || number != Some(r.draw) {
        return Ok(None);
    }
    let text: Option<String> = redis::cmd("GET")
        .arg(keys.draw_moved())
        .query_async(conn)
        .await
        .map_err(unable)?;
    let round_one = r.rounds.first().copied().unwrap_or(0);
    let moved = text
        .as_deref()
        .and_then(|t| MovedSeats::parse(t, round_one))
        .filter(|m| m.draw == r.draw);
    let rounds = r.rounds.clone();
    Ok(Some(move |leaf: u64| match slot_of_rank(&rounds, leaf) {
        Some((1, index)) => moved.as_ref().is_some_and(|m| m.contains(index)),
        Some(_) => true,
        None => false,
    }))
}
