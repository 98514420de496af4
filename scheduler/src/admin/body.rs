//! What the admin API's routes take: JSON bodies (an object, unknown
//! fields and `null`s refused, at most [`MAX_BODY`](super::MAX_BODY)
//! bytes) and the reset's query, each refusal a 400 or 413 saying why.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::{error, MAX_BODY};

/// Why a request body was not taken.
#[derive(Debug)]
pub(super) struct BodyError(StatusCode, &'static str, String);

impl IntoResponse for BodyError {
    fn into_response(self) -> Response {
        error(self.0, self.1, &self.2)
    }
}

/// A JSON body of `T` (unknown fields refused), or a 400/413 saying why.
pub(super) fn body<T: DeserializeOwned>(
    bytes: Result<Bytes, BytesRejection>,
) -> Result<T, BodyError> {
    let bytes = bytes.map_err(|e| {
        BodyError(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("The body is over {MAX_BODY} bytes or unreadable: {e}"),
        )
    })?;
    let bad = |e: String| {
        BodyError(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("The body is not the JSON this route takes: {e}"),
        )
    };
    // An object, not an array serde would read into the struct by position.
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v @ serde_json::Value::Object(_)) => T::deserialize(v).map_err(|e| bad(e.to_string())),
        Ok(_) => Err(bad("a JSON object is expected".into())),
        Err(e) => Err(bad(e.to_string())),
    }
}

/// `PUT …/schedule`: either time, or both (DELETE clears).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScheduleBody {
    #[serde(default, deserialize_with = "present")]
    pub(super) opens_at: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(super) closes_at: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(super) beacon: Option<String>,
}

/// A field that may be left out but, when given, is a string: `null` is
/// refused rather than read as "left out" (DELETE clears).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// `POST …/bypasses`: who the link is for, how long it lives (default 120
/// minutes, as the CLI's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BypassBody {
    pub(super) name: String,
    #[serde(default = "default_minutes", deserialize_with = "whole_number")]
    pub(super) ttl_minutes: u64,
}

/// A non-negative whole number, written `30` or `30.0` (JSON Schema counts
/// both as integers); anything else is a 400.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    n.as_u64()
        .or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(f))
                .map(|f| f as u64)
        })
        .ok_or_else(|| serde::de::Error::custom("must be a whole number of minutes"))
}

/// A bypass link's life when the body names none.
fn default_minutes() -> u64 {
    120
}

/// `PUT …/visitors/{user}/revocation`: how long (default: the queue's
/// `status_ttl_ms`); the body may be left out.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RevokeBody {
    #[serde(default, deserialize_with = "some_whole_number")]
    pub(super) minutes: Option<u64>,
}

fn some_whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    whole_number(d).map(Some)
}

/// `POST …/reset?force=true`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResetQuery {
    #[serde(default)]
    pub(super) force: bool,
}

/// `PUT …/notice`: the default text, and optionally a text per language.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoticeBody {
    pub(super) text: String,
    #[serde(default)]
    pub(super) texts: NoticeTexts,
}

/// `texts`: a JSON object of strings by language (`{"de": "…"}`), read in
/// order; the languages and texts are checked by the action.
#[derive(Debug, Default)]
pub(super) struct NoticeTexts(pub(super) Vec<(String, String)>);

impl<'de> Deserialize<'de> for NoticeTexts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = NoticeTexts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of texts by language, e.g. {\"de\": \"…\"}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<NoticeTexts, A::Error> {
                let mut out = Vec::new();
                while let Some((lang, text)) = map.next_entry::<String, String>()? {
                    out.push((lang, text));
                }
                Ok(NoticeTexts(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `PUT …/stock`: exactly one of `set` (units left for sale from now),
/// `add` (units added; negative: taken away), `refund` (units of refunded
/// orders) or `overbook` (the margin in percent, or `"auto"`: measured).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StockBody {
    #[serde(default, deserialize_with = "some_count")]
    pub(super) set: Option<u64>,
    #[serde(default, deserialize_with = "some_signed_count")]
    pub(super) add: Option<i64>,
    #[serde(default, deserialize_with = "some_count")]
    pub(super) refund: Option<u64>,
    #[serde(default)]
    pub(super) overbook: Option<Overbook>,
}

/// `overbook`: a percentage, or `"auto"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Overbook {
    Percent(serde_json::Number),
    Word(String),
}

/// A whole number as JSON may write it (`5` or `5.0`), within ±`limit`.
fn integer(n: &serde_json::Number, limit: f64) -> Option<i64> {
    n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= limit)
            .map(|f| f as i64)
    })
}

fn some_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    integer(&n, 1e12)
        .and_then(|n| u64::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom("must be a whole number of units, 0 or more"))
}

fn some_signed_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    integer(&n, 1e12)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom("must be a whole number of units"))
}

impl StockBody {
    /// The one change it asks for, or why it is not one.
    pub(super) fn change(self) -> Result<queuegate_shared::ops::StockChange, String> {
        use queuegate_shared::ops::StockChange;
        let overbook = match self.overbook {
            None => None,
            Some(Overbook::Percent(p)) => {
                match integer(&p, 1e12).and_then(|p| u64::try_from(p).ok()) {
                    Some(p) => Some(StockChange::Overbook(Some(p))),
                    None => {
                        return Err(format!(
                            "overbook {p}: give a whole percentage from 0 to 100"
                        ))
                    }
                }
            }
            Some(Overbook::Word(w)) if w == "auto" => Some(StockChange::Overbook(None)),
            Some(Overbook::Word(w)) => {
                return Err(format!(
                    "overbook {w:?}: give a percentage from 0 to 100, or \"auto\""
                ))
            }
        };
        let asked: Vec<StockChange> = [
            self.set.map(StockChange::Set),
            self.add.map(StockChange::Add),
            self.refund.map(StockChange::Refund),
            overbook,
        ]
        .into_iter()
        .flatten()
        .collect();
        match asked[..] {
            [one] => Ok(one),
            _ => Err("give exactly one of set, add, refund or overbook".into()),
        }
    }
}
