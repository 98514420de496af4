//! Typed calls of the Lua scripts: each request builds its KEYS and ARGV,
//! each reply is decoded from a client-neutral [`Value`](crate::value::Value).

mod admit;
mod browse;
mod bypass;
mod challenge;
mod configure;
mod consume;
mod draw;
mod enter;
mod lease;
mod observed;
mod origin;
mod pass;
mod revoke;
mod schedule;
mod settings;
mod settle;
mod status;
mod stock;
mod unconsume;
mod visitor;

pub use admit::{rate_bucket_cap, Admit, AdmitCounts, AdmitReply, Refused, RATE_BUCKET_TICKS};
pub use browse::{Browse, BrowseReply, Look};
pub use bypass::{Bypass, BypassCall, BypassReply};
pub use challenge::{ChallengeTerms, Terms};
pub use configure::{Configure, NoticeBefore, SetNotice, SetState, StateSwitch};
pub use consume::{Consume, ConsumeReply};
pub use draw::{
    parse_rounds, Dealt, DrawOpen, DrawPlace, DrawReveal, DrawSeed, DrawShuffle, DrawState,
    Drawing, FreshCommit, Placed, RevealStep, Sealed,
};
pub use enter::{Enter, EnterReply, Refusal};
pub use lease::{LeaseAcquire, LeaseAcquired, LeaseRelease};
pub use observed::{Observed, Position, PreQueueFacts, WaitingFacts};
pub use origin::{Answers, ControlRecord, OriginRead, OriginReply, OriginWindow, LATENCY_BUCKETS};
pub use pass::{Pass, PassReply, QueueNeeded, RouteKind};
pub use revoke::{Revoke, RevokeCall, RevokeReply, MAX_REVOKE_MS};
pub use schedule::{
    Change, FileMoment, FilePublished, FileState, PublishFile, Schedule, Scheduled,
};
pub use settings::{SetSettings, SettingsReply};
pub use settle::{Outcome, Settle, SettleReply};
pub use status::{QueueStatus, Status};
pub use stock::{
    units_from_header, Stock, StockChange, StockReply, StockState, MAX_OVERBOOK_PERCENT,
    MAX_STOCK_UNITS,
};
pub use unconsume::Unconsume;
pub use visitor::{StatusChange, TokenWindow, VisitorRead, VisitorRecords};
