//! `GET /queue/draw`: a draw's public record (docs/drop-day.md, *A draw
//! anyone can verify*): before the reveal the next draw's commitment only;
//! after it the record and its pages of leaves, immutable, so each isolate
//! reads a record's header or page from Redis once and every cache in
//! front of the worker may keep it for good. And a drawn visitor's
//! receipt, which `GET /queue/position?receipt=1` carries.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use queuegate_edge::url;
use queuegate_shared::beacon::BeaconRound;
use queuegate_shared::draw_proof::{
    decode_page, leaf, leaf_node, page_proof, salt, DrawPlaces, LeafPage, Receipt, PAGE_SIZE,
};
use queuegate_shared::fields::{commit as dc, COMMIT_PENDING, COMMIT_REVEALED};
use queuegate_shared::{QueueKeys, UserId};

use super::App;
use crate::error::EdgeError;
use crate::http::{self, Request, Response};

/// Record fields an isolate keeps (headers, pages, the pages' roots, salt
/// keys: written once, never changed), at most this many, oldest out
/// first: ~64 KB a page, so a few MB at most.
const KEPT: usize = 48;

thread_local! {
    /// (key, field) → value, of records only.
    static RECORDS: RefCell<VecDeque<(String, Rc<str>)>> = const { RefCell::new(VecDeque::new()) };
}

fn kept(id: &str) -> Option<Rc<str>> {
    RECORDS.with(|r| {
        r.borrow()
            .iter()
            .find(|(k, _)| k == id)
            .map(|(_, v)| v.clone())
    })
}

fn keep(id: String, value: Rc<str>) {
    RECORDS.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() >= KEPT {
            r.pop_front();
        }
        r.push_back((id, value));
    });
}

/// A reply that caches anywhere for good.
fn immutable(resp: Response) -> Result<Response, EdgeError> {
    http::set(
        resp.headers(),
        "cache-control",
        "public, max-age=31536000, immutable",
    );
    Ok(resp)
}

/// A record's header as the reply: the text the scheduler wrote, as it
/// is (the scheduler wrote it from a `DrawRecord`; the edge reads only its
/// [`DrawPlaces`]). The caller says how long it may be cached.
fn record_reply(header: &str) -> Response {
    Response::text(200, "application/json; charset=utf-8", header.to_string())
}

/// The pending commitment (`GET /queue/draw` before the reveal): no seed
/// yet; its keys in this order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Committed<'a> {
    /// The beacon round named in advance, if any (no value yet).
    beacon: Option<BeaconRound>,
    commitment: Option<&'a str>,
    committed_at: Option<u64>,
    opens_at: Option<u64>,
    queue: &'a str,
    state: &'static str,
}

impl App {
    /// Fields of draw `n`'s record, from the isolate when kept, else with
    /// one `HMGET` (and kept); None for each absent field. Nothing is kept
    /// before the record's header exists (a page is written before it).
    async fn record_fields(
        &self,
        keys: &QueueKeys,
        n: u64,
        fields: &[&str],
    ) -> Result<Vec<Option<Rc<str>>>, EdgeError> {
        let key = keys.draw_record(n);
        let id = |f: &str| format!("{key}\u{0}{f}");
        let known: Vec<Option<Rc<str>>> = fields.iter().map(|f| kept(&id(f))).collect();
        if known.iter().all(Option::is_some) {
            return Ok(known);
        }
        let mut ask: Vec<&str> = fields.to_vec();
        if !ask.contains(&dc::HEADER) {
            ask.push(dc::HEADER);
        }
        let values = self.redis()?.hmget(&key, &ask).await?;
        let sealed = ask
            .iter()
            .zip(&values)
            .any(|(f, v)| *f == dc::HEADER && v.is_some());
        let mut out = Vec::with_capacity(fields.len());
        for (f, v) in ask.iter().zip(values).take(fields.len()) {
            let v: Option<Rc<str>> = v.map(Rc::from);
            if let (true, Some(v)) = (sealed, &v) {
                keep(id(f), v.clone());
            }
            out.push(v);
        }
        Ok(out)
    }

    /// Who holds which place in draw `n`, and its public record's text;
    /// None before its reveal.
    async fn record(
        &self,
        keys: &QueueKeys,
        n: u64,
    ) -> Result<Option<(DrawPlaces, Rc<str>)>, EdgeError> {
        let mut v = self.record_fields(keys, n, &[dc::HEADER]).await?;
        Ok(v.pop()
            .flatten()
            .and_then(|h| Some((serde_json::from_str(&h).ok()?, h))))
    }

    /// `GET /queue/draw?queue=Q[&draw=N[&page=K]]`.
    pub(super) async fn draw_record(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let own_url = req.inner().url();
        let number = |name: &str| -> Result<Option<u64>, EdgeError> {
            url::query_param(&own_url, name)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| EdgeError::BadRequest(format!("{name} must be a number")))
                })
                .transpose()
        };
        let (draw, page) = (number("draw")?, number("page")?);
        let Some(n) = draw else {
            if page.is_some() {
                return Err(EdgeError::BadRequest("page needs draw".into()));
            }
            return self.latest(&queue.to_string(), &keys).await;
        };
        let Some((_, header)) = self.record(&keys, n).await? else {
            return Err(EdgeError::NotFound);
        };
        let Some(k) = page else {
            return immutable(record_reply(&header));
        };
        let field = format!("{}{k}", dc::PAGE);
        let text = self
            .record_fields(&keys, n, &[&field])
            .await?
            .pop()
            .flatten()
            .ok_or(EdgeError::NotFound)?;
        let leaves = decode_page(&text)
            .ok_or_else(|| EdgeError::Internal(format!("draw {n} page {k} is not leaves")))?;
        immutable(http::json(
            200,
            &LeafPage {
                draw: n,
                page: k,
                from: k * PAGE_SIZE,
                leaves: leaves.iter().map(hex::encode).collect(),
            },
        )?)
    }

    /// The latest: the pending commitment (no seed), or the last revealed
    /// draw's record. Cached briefly: it changes at each commitment and
    /// reveal.
    async fn latest(&self, queue: &str, keys: &QueueKeys) -> Result<Response, EdgeError> {
        let v = self
            .redis()?
            .hmget(
                &keys.draw_commit(),
                &[
                    dc::STATE,
                    dc::COMMITMENT,
                    dc::COMMITTED_AT,
                    dc::OPENS_AT,
                    dc::DRAW,
                    dc::BEACON,
                ],
            )
            .await?;
        let get = |i: usize| v.get(i).cloned().flatten();
        let resp = match get(0).as_deref() {
            Some(COMMIT_PENDING) => {
                let (commitment, committed_at, opens_at, beacon) = (get(1), get(2), get(3), get(5));
                let number = |t: &Option<String>| t.as_deref().and_then(|t| t.parse::<u64>().ok());
                http::json(
                    200,
                    &Committed {
                        beacon: beacon.and_then(|b| serde_json::from_str(&b).ok()),
                        commitment: commitment.as_deref(),
                        committed_at: number(&committed_at),
                        opens_at: number(&opens_at),
                        queue,
                        state: "committed",
                    },
                )?
            }
            Some(COMMIT_REVEALED) => {
                let n = get(4)
                    .and_then(|n| n.parse().ok())
                    .ok_or(EdgeError::NotFound)?;
                let (_, header) = self.record(keys, n).await?.ok_or(EdgeError::NotFound)?;
                record_reply(&header)
            }
            _ => return Err(EdgeError::NotFound),
        };
        http::set(resp.headers(), "cache-control", "public, max-age=5");
        Ok(resp)
    }

    /// The receipt of `user` in the last revealed draw while it waits on
    /// one of its places; None otherwise (not drawn, admitted, or dealt
    /// another identity's seat of its address group: see the docs).
    pub(super) async fn receipt(
        &self,
        queue: &str,
        keys: &QueueKeys,
        user: &UserId,
    ) -> Result<Option<Receipt>, EdgeError> {
        let redis = self.redis()?;
        let v = redis
            .hmget(&keys.draw_commit(), &[dc::STATE, dc::DRAW])
            .await?;
        let (Some(Some(COMMIT_REVEALED)), Some(Some(n))) = (
            v.first().map(Option::as_deref),
            v.get(1)
                .map(|n| n.as_deref().and_then(|n| n.parse::<u64>().ok())),
        ) else {
            return Ok(None);
        };
        let Some((record, _)) = self.record(keys, n).await? else {
            return Ok(None);
        };
        let Some(ticket) = redis.zscore(&keys.waiting(), user.as_str()).await? else {
            return Ok(None);
        };
        let Some(place) = ticket
            .checked_sub(record.ticket_base)
            .filter(|p| (1..=record.registrants).contains(p))
        else {
            return Ok(None);
        };
        let bad = |e: queuegate_shared::draw_proof::VerifyError| EdgeError::Internal(e.to_string());
        let Some(index) = record.index_at(place - 1).map_err(bad)? else {
            return Ok(None);
        };
        let page = index / PAGE_SIZE;
        let page_field = format!("{}{page}", dc::PAGE);
        let f = self
            .record_fields(keys, n, &[&page_field, dc::TOP, dc::SALT_KEY])
            .await?;
        let (Some(leaves), Some(top), Some(salt_key)) = (
            f[0].as_deref().and_then(decode_page),
            f[1].as_deref().and_then(decode_page),
            f[2].as_deref()
                .and_then(|k| queuegate_shared::draw_proof::parse_hash("salt key", k).ok()),
        ) else {
            return Ok(None);
        };
        let s = salt(&salt_key, user.as_str());
        let own = leaf(&s, user.as_str());
        let within = (index % PAGE_SIZE) as usize;
        if leaves.get(within) != Some(&own) {
            return Ok(None);
        }
        let from = page * PAGE_SIZE;
        let nodes: Vec<_> = leaves
            .iter()
            .zip(from..)
            .map(|(l, i)| leaf_node(record.round_of(i).unwrap_or(0), l))
            .collect();
        Ok(Some(Receipt {
            queue: queue.to_string(),
            draw: n,
            visitor: user.as_str().to_string(),
            salt: hex::encode(s),
            leaf: hex::encode(own),
            index,
            round: record.round_of(index).unwrap_or(0),
            proof: page_proof(&nodes, &top, index)
                .iter()
                .map(hex::encode)
                .collect(),
            root: record.root.clone(),
            place,
        }))
    }
}
