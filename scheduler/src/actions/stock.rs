//! `stock`: set, add to, refund, clear or show a queue's stock
//! (docs/drop-day.md, *Stock*). Every order the shop accepts takes its
//! units; when none is left the line is told `sold_out` and admission
//! stops, and raising the stock again reopens the line in the same order.

use queuegate_shared::ops::{Stock as StockCall, StockChange, StockReply, StockState};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::Config;
use crate::connect::RedisConn;
use crate::engine;

/// A change to (or a reading of) a queue's stock.
#[derive(Debug, Clone)]
pub struct Stock {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// What to do.
    pub change: StockChange,
}

/// A queue's stock after the action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StockNow {
    /// The queue.
    pub queue: String,
    /// Whether no unit is left (the line is told `sold_out`).
    pub sold_out: bool,
    /// The stock itself.
    #[serde(flatten)]
    pub stock: StockState,
}

impl Stock {
    /// The name in the audit log and the metric label.
    pub fn name(&self) -> &'static str {
        match self.change {
            StockChange::Show => "stock",
            StockChange::Set(_) => "stock_set",
            StockChange::Add(_) => "stock_add",
            StockChange::Refund(_) => "stock_refund",
            StockChange::Overbook(_) => "stock_overbook",
            StockChange::Clear => "stock_clear",
        }
    }

    /// What it changes, for the audit line.
    pub fn changes(&self) -> Option<String> {
        match self.change {
            StockChange::Set(n) => Some(format!("units left {n}")),
            StockChange::Add(n) => Some(format!("units {n:+}")),
            StockChange::Refund(n) => Some(format!("refunded {n}")),
            StockChange::Overbook(Some(p)) => Some(format!("overbooking {p} %")),
            StockChange::Overbook(None) => Some("overbooking measured".into()),
            StockChange::Clear | StockChange::Show => None,
        }
    }

    /// Does it. A number out of range, an add or refund without a stock,
    /// or a change that would take the units left or the sold count below
    /// zero is refused and changes nothing.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<StockNow, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let change = self.change.check().map_err(ActionError::BadInput)?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        match engine::run(
            conn,
            &StockCall {
                keys: &keys,
                change,
            },
        )
        .await?
        {
            StockReply::Done(stock) => Ok(StockNow {
                queue: q.id.to_string(),
                sold_out: stock.sold_out(),
                stock,
            }),
            StockReply::NoStock => Err(ActionError::Refused(format!(
                "queue {}: no stock is kept; set one first (stock {} --set N)",
                q.id, q.id
            ))),
            StockReply::BelowZero { have } => Err(ActionError::Conflict(format!(
                "queue {}: that would go below zero ({have} now)",
                q.id
            ))),
        }
    }
}
