//! The tags the scripts' replies carry ('waiting', 'full', …), declared
//! once: Rust decodes them through [`ReplyKind`], and each script gets the
//! ones it returns in a Lua table (`R.WAITING = 'waiting'`), never literals.

/// Declares [`ReplyKind`]: each variant with its wire name.
macro_rules! reply_kinds {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal,)*) => {
        /// A tag a script's reply carries (its first field, or a reason or
        /// earlier state after it).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ReplyKind {
            $($(#[$doc])* $variant,)*
        }

        impl ReplyKind {
            /// Every kind, in declaration order (so the Lua header's order).
            pub const ALL: &'static [ReplyKind] = &[$(ReplyKind::$variant),*];

            /// The tag as the scripts send it.
            pub const fn wire(self) -> &'static str {
                match self {
                    $(ReplyKind::$variant => $wire,)*
                }
            }

            /// The kind a tag names, `None` for a tag no script sends.
            pub fn parse(tag: &str) -> Option<ReplyKind> {
                match tag {
                    $($wire => Some(ReplyKind::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

reply_kinds! {
    /// The visitor is in line (`waiting_reply`).
    Waiting = "waiting",
    /// The visitor is pre-queued or being drawn (`pre_queue_reply`).
    PreQueue = "pre_queue",
    /// The visitor holds an entry token.
    Admitted = "admitted",
    /// The visitor's token was consumed; the origin has not settled.
    InFlight = "in_flight",
    /// The origin accepted the visitor's order.
    Ordered = "ordered",
    /// A token ran out unused, or a settle found no retry left.
    Expired = "expired",
    /// The visitor stopped polling and was dropped.
    Abandoned = "abandoned",
    /// An operator revoked the visitor (or a bypass link).
    Revoked = "revoked",
    /// The visitor holds nothing in this queue.
    NotInQueue = "not_in_queue",
    /// No scheduler has published settings: the script changed nothing.
    Unconfigured = "unconfigured",
    /// The line (or a bypass link's list, or the free slots) is full.
    Full = "full",
    /// The queue takes no new places (its state follows).
    Closed = "closed",
    /// A guard check was not passed (its counter follows).
    Guard = "guard",
    /// The address spent its entry budget (the wait follows).
    TooMany = "too_many",
    /// A proof-of-work solution used before.
    Reused = "reused",
    /// A solution below the level in force; or a settle or unconsume for a
    /// token that is no longer in flight.
    Stale = "stale",
    /// The address group holds its cap of live places.
    AddressFull = "address_full",
    /// Done.
    Ok = "ok",
    /// A token that is not the one issued.
    Invalid = "invalid",
    /// A token consumed before.
    Used = "used",
    /// A token presented before its activation (the wait follows).
    Early = "early",
    /// A consumed token given back.
    Restored = "restored",
    /// No draw runs.
    Idle = "idle",
    /// A draw runs (its terms follow).
    Drawing = "drawing",
    /// The draw's cursor moved since the caller read it.
    Moved = "moved",
    /// A batch of the draw was placed.
    Placed = "placed",
    /// The caller does not hold the scheduler lease.
    NotOwner = "not_owner",
    /// Idle passthrough refused: the visitor must queue (why follows).
    Queue = "queue",
    /// Passthrough: the visitor holds a place or token already.
    Holds = "holds",
    /// Passthrough is off for this queue.
    Off = "off",
    /// Passthrough: the shared admission rate is spent.
    Rate = "rate",
    /// No such bypass link.
    Unknown = "unknown",
    /// A bypass link of that id exists already.
    Exists = "exists",
    /// Lifting a revocation of a visitor that is not revoked.
    NotRevoked = "not_revoked",
    /// A revocation was lifted.
    Lifted = "lifted",
    /// A revoked visitor was pre-queued.
    PreQueued = "pre_queued",
    /// A browse route's visitor holds no live session.
    NoSession = "no_session",
    /// The queue's stock is gone: no new place, no order.
    SoldOut = "sold_out",
}

impl ReplyKind {
    /// Its field in the scripts' Lua table `R` of tags: the tag in
    /// capitals (`R.NOT_IN_QUEUE`).
    pub fn lua_field(self) -> String {
        self.wire().to_ascii_uppercase()
    }
}

impl std::fmt::Display for ReplyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.wire())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_back_from_its_wire_name() {
        for kind in ReplyKind::ALL {
            assert_eq!(ReplyKind::parse(kind.wire()), Some(*kind));
        }
        let mut wires: Vec<&str> = ReplyKind::ALL.iter().map(|k| k.wire()).collect();
        wires.sort_unstable();
        wires.dedup();
        assert_eq!(wires.len(), ReplyKind::ALL.len(), "a wire name twice");
        assert_eq!(ReplyKind::parse("nonsense"), None);
        assert_eq!(ReplyKind::NotInQueue.lua_field(), "NOT_IN_QUEUE");
    }
}
