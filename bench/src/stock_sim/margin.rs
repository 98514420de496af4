//! The admit tick's stock arithmetic in Rust: a mirror of the prelude's
//! `stock.tick` and of the cap `admit.lua` applies with it
//! (shared/lua/prelude.lua, docs/drop-day.md, *Stock*), so the simulator
//! lets out exactly the turns the script would.

use queuegate_shared::fields::{STOCK_MARGIN_MAX_PER_MILLE, STOCK_MEASURED_AFTER};

/// What the tick reads of the drop since the stock was set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Orders settled with a success (`stats.ordered` less the base).
    pub ordered: u64,
    /// Turns expired unused (`stats.expired` less the base).
    pub expired: u64,
    /// Units sold (`stock_sold`).
    pub sold: u64,
}

/// What the tick writes for the next scripts and the edge's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// The overbooking margin in force, per mille.
    pub margin_per_mille: u64,
    /// Orders per ended turn, per mille (None: fewer than
    /// `STOCK_MEASURED_AFTER` turns ended).
    pub conversion_per_mille: Option<u64>,
    /// Units per order, per mille (None: no order yet).
    pub per_order_per_mille: Option<u64>,
}

/// Mirrors `stock.tick`: the operator's `overbook_percent` if set, else
/// once 20 turns ended `min(1000, ⌊1000·ended/ordered⌋ − 1000)` (1000 with
/// no order), before that 0.
pub fn tick(c: Counts, overbook_percent: Option<u64>) -> Measured {
    let ended = c.ordered + c.expired;
    let per_order_per_mille = (c.ordered > 0).then(|| 1_000 * c.sold / c.ordered);
    let mut conversion_per_mille = None;
    let mut margin = 0;
    if ended >= STOCK_MEASURED_AFTER {
        conversion_per_mille = Some(1_000 * c.ordered / ended);
        margin = (1_000 * ended)
            .checked_div(c.ordered)
            .map_or(STOCK_MARGIN_MAX_PER_MILLE, |r| {
                STOCK_MARGIN_MAX_PER_MILLE.min(r - 1_000)
            });
    }
    if let Some(p) = overbook_percent {
        margin = 10 * p;
    }
    Measured {
        margin_per_mille: margin,
        conversion_per_mille,
        per_order_per_mille,
    }
}

/// Mirrors the cap in `admit.lua` (and `stock.room`): the turns the stock
/// still lets out, `⌊left·(1000 + margin)/1000⌋ − out`, never below 0.
pub fn room(left: u64, margin_per_mille: u64, out: u64) -> u64 {
    (left * (1_000 + margin_per_mille) / 1_000).saturating_sub(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ordered: u64, expired: u64, sold: u64) -> Counts {
        Counts {
            ordered,
            expired,
            sold,
        }
    }

    #[test]
    fn no_margin_before_twenty_turns_ended() {
        let m = tick(counts(10, 9, 12), None);
        assert_eq!(m.margin_per_mille, 0);
        assert_eq!(m.conversion_per_mille, None);
        assert_eq!(m.per_order_per_mille, Some(1_200));
    }

    #[test]
    fn the_margin_is_one_no_show_per_order_at_most_the_stock_again() {
        // 12 of 20 ordered: ⌊1000·20/12⌋ − 1000 = 666.
        let m = tick(counts(12, 8, 12), None);
        assert_eq!(m.margin_per_mille, 666);
        assert_eq!(m.conversion_per_mille, Some(600));
        // 5 of 20 would be 3000: capped at 1000; none ordered, 1000 too.
        assert_eq!(tick(counts(5, 15, 5), None).margin_per_mille, 1_000);
        let none = tick(counts(0, 25, 0), None);
        assert_eq!(none.margin_per_mille, 1_000);
        assert_eq!(none.per_order_per_mille, None);
        // The operator's percent wins, measured or not.
        assert_eq!(tick(counts(12, 8, 12), Some(20)).margin_per_mille, 200);
        assert_eq!(tick(counts(1, 0, 1), Some(5)).margin_per_mille, 50);
    }

    #[test]
    fn room_counts_the_turns_out() {
        assert_eq!(room(100, 666, 0), 166);
        assert_eq!(room(100, 666, 160), 6);
        assert_eq!(room(100, 0, 120), 0);
        assert_eq!(room(0, 1_000, 0), 0);
    }
}
