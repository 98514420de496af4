//! `stock`: the operator's changes to a queue's stock and its reading
//! (docs/drop-day.md, *Stock*).

use serde::Serialize;

use crate::fields::STOCK_MAX_UNITS_PER_ORDER;
use crate::keys::QueueKeys;
use crate::reply::ReplyKind;
use crate::script::{Invocation, Operation, STOCK};
use crate::value::{DecodeError, Fields, Value};

/// The most units a stock may hold (a bound for the counters' arithmetic,
/// far beyond any drop).
pub const MAX_STOCK_UNITS: u64 = 1_000_000_000;

/// The largest overbooking margin an operator may set, in percent.
pub const MAX_OVERBOOK_PERCENT: u64 = 100;

/// What the operator does to the stock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StockChange {
    /// Units left for sale from now (orders in flight keep theirs).
    Set(u64),
    /// Units added, or taken away when negative.
    Add(i64),
    /// Units of refunded orders: back on sale and off the sold count.
    Refund(u64),
    /// The overbooking margin in percent; None: measured from the drop.
    Overbook(Option<u64>),
    /// No stock kept any more: admission and orders are no longer
    /// limited by it.
    Clear,
    /// Read only.
    Show,
}

impl StockChange {
    /// Its name, for the audit line and the metric label.
    pub fn name(self) -> &'static str {
        match self {
            StockChange::Set(_) => "set",
            StockChange::Add(_) => "add",
            StockChange::Refund(_) => "refund",
            StockChange::Overbook(_) => "overbook",
            StockChange::Clear => "clear",
            StockChange::Show => "show",
        }
    }

    /// Checks the numbers before anything is sent: an error says what is
    /// wrong and nothing changes.
    pub fn check(self) -> Result<StockChange, String> {
        match self {
            StockChange::Set(n) | StockChange::Refund(n) if n > MAX_STOCK_UNITS => {
                Err(format!("{n} units: at most {MAX_STOCK_UNITS} may be kept"))
            }
            StockChange::Add(n) if n.unsigned_abs() > MAX_STOCK_UNITS => Err(format!(
                "{n} units: at most {MAX_STOCK_UNITS} may be added or taken at once"
            )),
            StockChange::Add(0) | StockChange::Refund(0) => {
                Err("0 units: nothing to change".into())
            }
            StockChange::Overbook(Some(p)) if p > MAX_OVERBOOK_PERCENT => Err(format!(
                "overbooking {p} %: at most {MAX_OVERBOOK_PERCENT} %"
            )),
            ok => Ok(ok),
        }
    }
}

/// A call of the stock script.
#[derive(Debug, Clone, Copy)]
pub struct Stock<'a> {
    pub keys: &'a QueueKeys,
    pub change: StockChange,
}

/// A queue's stock as the script leaves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StockState {
    /// Units left for sale, not counting those held by orders in flight;
    /// None: no stock is kept.
    pub left: Option<u64>,
    /// Units sold since the stock was first set.
    pub sold: u64,
    /// Units held by orders in flight.
    pub held: u64,
    /// The operator's overbooking margin in percent; None: measured.
    pub overbook_percent: Option<u64>,
    /// The margin in force (the last tick's), per mille.
    pub margin_per_mille: u64,
    /// The drop's measured conversion, per mille (None: not measured yet).
    pub conversion_per_mille: Option<u64>,
    /// Mean units per order, per mille (None: no order yet).
    pub units_per_order_per_mille: Option<u64>,
    /// Turns out: tokens issued and not spent.
    pub turns_out: u64,
}

impl StockState {
    /// Sold out: a stock is kept and no unit is left.
    pub fn sold_out(&self) -> bool {
        self.left == Some(0)
    }
}

/// What the script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StockReply {
    /// Done (or read): the stock now.
    Done(StockState),
    /// No stock is kept: set one first.
    NoStock,
    /// The change would take the units left or the sold count (given)
    /// below zero.
    BelowZero { have: u64 },
}

impl Operation for Stock<'_> {
    type Reply = StockReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let n = match self.change {
            StockChange::Set(n) | StockChange::Refund(n) => n.to_string(),
            StockChange::Add(n) => n.to_string(),
            StockChange::Overbook(p) => p.map(|p| p.to_string()).unwrap_or_default(),
            StockChange::Clear | StockChange::Show => String::new(),
        };
        Invocation {
            script: &STOCK,
            keys: vec![k.config(), k.stats(), k.stock_held()],
            args: vec![self.change.name().to_string(), n],
        }
    }

    fn decode(&self, value: Value) -> Result<StockReply, DecodeError> {
        let f = Fields::new("stock", value)?;
        match f.kind(0)? {
            ReplyKind::Unknown => Ok(StockReply::NoStock),
            ReplyKind::Invalid => Ok(StockReply::BelowZero { have: f.uint(1)? }),
            ReplyKind::Ok => {
                let opt = |i: usize| -> Result<Option<u64>, DecodeError> {
                    match f.text(i)? {
                        "" => Ok(None),
                        _ => f.uint(i).map(Some),
                    }
                };
                Ok(StockReply::Done(StockState {
                    left: opt(1)?,
                    sold: f.uint(2)?,
                    held: f.uint(3)?,
                    overbook_percent: opt(4)?,
                    margin_per_mille: f.uint(5)?,
                    conversion_per_mille: opt(6)?,
                    units_per_order_per_mille: opt(7)?,
                    turns_out: f.uint(8)?,
                }))
            }
            other => Err(f.unexpected(other)),
        }
    }
}

/// The units an order sold, from the origin's `Queuegate-Units` header:
/// a whole number from 0 up to [`STOCK_MAX_UNITS_PER_ORDER`] (more counts
/// as that many); absent or unreadable, one.
pub fn units_from_header(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(1, |n| n.min(STOCK_MAX_UNITS_PER_ORDER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_numbers_are_refused_before_anything_is_sent() {
        assert!(StockChange::Set(MAX_STOCK_UNITS + 1).check().is_err());
        assert!(StockChange::Add(0).check().is_err());
        assert!(StockChange::Refund(0).check().is_err());
        assert!(StockChange::Overbook(Some(101)).check().is_err());
        assert_eq!(StockChange::Set(0).check(), Ok(StockChange::Set(0)));
        assert_eq!(StockChange::Add(-3).check(), Ok(StockChange::Add(-3)));
        assert_eq!(
            StockChange::Overbook(None).check(),
            Ok(StockChange::Overbook(None))
        );
    }

    #[test]
    fn the_origin_states_the_units_or_one_is_sold() {
        assert_eq!(units_from_header(None), 1);
        assert_eq!(units_from_header(Some("2")), 2);
        assert_eq!(units_from_header(Some(" 3 ")), 3);
        assert_eq!(units_from_header(Some("0")), 0);
        assert_eq!(units_from_header(Some("-1")), 1);
        assert_eq!(units_from_header(Some("two")), 1);
        assert_eq!(
            units_from_header(Some("99999999")),
            STOCK_MAX_UNITS_PER_ORDER
        );
    }
}
