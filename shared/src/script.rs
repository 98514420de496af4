//! The Lua scripts, each assembled once (the data contract's names it uses
//! from [`fields`](crate::fields), the shared prelude, the script) with its
//! SHA-1 computed once, and the invocation (KEYS and ARGV) a typed request
//! builds.

#[cfg(not(target_arch = "wasm32"))]
use std::collections::BTreeSet;
use std::sync::OnceLock;

use crate::value::{DecodeError, Value};
#[cfg(not(target_arch = "wasm32"))]
use crate::{fields, lua};

/// One Lua script: its text and its SHA-1 for EVALSHA.
#[derive(Debug)]
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub struct Script {
    name: &'static str,
    prelude: bool,
    body: &'static str,
    source: OnceLock<String>,
    sha1: &'static str,
}

/// A script's text as shipped: `shared/lua/<name>.lua` without its comment
/// lines (build.rs, [`crate::lua_strip`]).
#[cfg(not(target_arch = "wasm32"))]
macro_rules! shipped {
    ($name:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/lua/", $name, ".lua"))
    };
}

/// In the worker's wasm the scripts are known by their pinned hashes only:
/// their text is one of the worker's static assets (`lua/<name>.lua`,
/// written by `worker/examples/assets.rs` from [`Script::source`]), read
/// after a NOSCRIPT reply, which keeps ~5 KB gzipped out of the wasm.
#[cfg(target_arch = "wasm32")]
macro_rules! shipped {
    ($name:literal) => {
        ""
    };
}

#[cfg(not(target_arch = "wasm32"))]
const PRELUDE: &str = shipped!("prelude");

impl Script {
    /// A script with its SHA-1 pinned here rather than computed: the
    /// worker then carries no SHA-1 code, and `hashes_are_pinned` checks
    /// each pin against the assembled source, so a script change cannot
    /// ship with a stale hash.
    const fn new(
        name: &'static str,
        prelude: bool,
        body: &'static str,
        sha1: &'static str,
    ) -> Self {
        Script {
            name,
            prelude,
            body,
            source: OnceLock::new(),
            sha1,
        }
    }

    /// Short name, for logs and errors.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source, for EVAL after a NOSCRIPT reply (not in the wasm:
    /// the worker reads it from its assets): the contract's
    /// names that the script and its prelude use, the prelude where the
    /// script uses it, then the script, so each still runs as one
    /// self-contained EVAL.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn source(&self) -> &str {
        self.source.get_or_init(|| {
            let prelude = if self.prelude { PRELUDE } else { "" };
            let used: BTreeSet<&str> = lua::words(prelude).chain(lua::words(self.body)).collect();
            let header = fields::lua_header(|name| used.contains(name));
            format!("{header}{prelude}{}", self.body)
        })
    }

    /// The script's own text, without the generated header and prelude.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn body(&self) -> &'static str {
        self.body
    }

    /// Lowercase hex SHA-1 of the source, as Redis computes it (pinned;
    /// see [`Script::new`]).
    pub fn sha1(&self) -> &'static str {
        self.sha1
    }
}

/// Takes a ticket (or returns the existing state).
pub static ENTER: Script = Script::new(
    "enter",
    true,
    shipped!("enter"),
    "afea31030e49b21f4daba5830b16f277583e9662",
);
/// Reports a user's state and marks them as seen.
pub static POSITION: Script = Script::new(
    "position",
    true,
    shipped!("position"),
    "5a1aca5255ead040efdbf332aaa2be2102882f0d",
);
/// One scheduler tick: sweeps, drops leavers, admits.
pub static ADMIT: Script = Script::new(
    "admit",
    true,
    shipped!("admit"),
    "0dc86886c9614573f6e90e6a45408d40985856a5",
);
/// Compare-and-delete of an entry token.
pub static CONSUME: Script = Script::new(
    "consume",
    true,
    shipped!("consume"),
    "8db6a683d4f71c509a857ef5a1734fdd438d7185",
);
/// Records the origin's outcome after a consume.
pub static SETTLE: Script = Script::new(
    "settle",
    true,
    shipped!("settle"),
    "319d44eb956807ba29c076c9810636f6abe72704",
);
/// Takes or extends the scheduler lease.
pub static LEASE_ACQUIRE: Script = Script::new(
    "lease_acquire",
    false,
    shipped!("lease_acquire"),
    "1a1dd2d5b7a62768fe6a5ea54ef2e0043378acf1",
);
/// Drops the lease if still owned.
pub static LEASE_RELEASE: Script = Script::new(
    "lease_release",
    false,
    shipped!("lease_release"),
    "0b6856bae609a74eca4c4a8eecd99e4cb3a47e6b",
);

/// Publishes settings without touching the operator's state.
pub static CONFIGURE: Script = Script::new(
    "configure",
    false,
    shipped!("configure"),
    "45245e60efe1b76e68d59be2b22880d6abf0ae32",
);
/// Reads a new proof-of-work challenge's terms.
pub static CHALLENGE: Script = Script::new(
    "challenge",
    true,
    shipped!("challenge"),
    "be0d769a731da80f1f9b55abc46c0bcbf36240e4",
);
/// Reads what the operator's `status` shows.
pub static STATUS: Script = Script::new(
    "status",
    false,
    shipped!("status"),
    "996a1b4a5636bdf05053341d66de694bbdc716b5",
);
/// Switches the operator's queue state.
pub static SET_STATE: Script = Script::new(
    "set_state",
    false,
    shipped!("set_state"),
    "406da9d0b5ca493ce1aac9adf76aa439ccfb45e8",
);

/// Reads the origin's recent answers and records the origin control's
/// state.
pub static ORIGIN_WINDOW: Script = Script::new(
    "origin_window",
    true,
    shipped!("origin_window"),
    "747326d7a3c44439e2a3b7d79ee140835a484210",
);

/// Idle passthrough of a token-less protected request.
pub static PASS: Script = Script::new(
    "pass",
    true,
    shipped!("pass"),
    "be0c0ac2a3a70c90d49fa62a0b0e78ee83d695ee",
);
/// Seals a pre-queue after its opening and fixes the draw's seed.
pub static DRAW_OPEN: Script = Script::new(
    "draw_open",
    true,
    shipped!("draw_open"),
    "f9addb264cec72ba903920456c50d982665e5397",
);
/// Places one batch of a running draw.
pub static DRAW_PLACE: Script = Script::new(
    "draw_place",
    true,
    shipped!("draw_place"),
    "2385b0b2e80d0e0e681af9eaa0e9f47e6835adcc",
);
/// Sets or clears a queue's opening and closing.
pub static SCHEDULE: Script = Script::new(
    "schedule",
    false,
    shipped!("schedule"),
    "a663d9978e67b721efcf1eb806b9fd3f12d9a823",
);
/// Sets or clears the operator's notice to the line.
pub static SET_NOTICE: Script = Script::new(
    "set_notice",
    false,
    shipped!("set_notice"),
    "b4cae3daf2ef593fc6f7dde675222ad8cc9af98c",
);
/// Gives back a token whose consume's reply was lost.
pub static UNCONSUME: Script = Script::new(
    "unconsume",
    true,
    shipped!("unconsume"),
    "8669bfe9bd84aefbd541494f1e7e5fbf206a6860",
);

/// Checks, uses, creates and revokes bypass links.
pub static BYPASS: Script = Script::new(
    "bypass",
    true,
    shipped!("bypass"),
    "d6d3f5ea4991396282c258071a999dce1ef75aa2",
);

/// Revokes a visitor (ends its place or token) or lifts a revocation.
pub static REVOKE: Script = Script::new(
    "revoke",
    true,
    shipped!("revoke"),
    "cd77cae3cb3ebb2719d73e345bd839d7bbcc2342",
);

/// Changes a queue's run-time settings if nobody changed them meanwhile.
pub static SETTINGS: Script = Script::new(
    "settings",
    false,
    shipped!("settings"),
    "23e5433ed847ee1b452cb8367770716664d8153b",
);

/// Reads what the operator's `visitor` lookup shows.
pub static VISITOR: Script = Script::new(
    "visitor",
    false,
    shipped!("visitor"),
    "671933bd0bb00b99b2f1b3cf79b81fd4c384d1b4",
);

/// Every script, for preloading (SCRIPT LOAD) and the pinned-hash test.
pub fn all() -> [&'static Script; 22] {
    [
        &ENTER,
        &POSITION,
        &ADMIT,
        &CONSUME,
        &SETTLE,
        &LEASE_ACQUIRE,
        &LEASE_RELEASE,
        &CONFIGURE,
        &SET_STATE,
        &STATUS,
        &CHALLENGE,
        &ORIGIN_WINDOW,
        &PASS,
        &DRAW_OPEN,
        &DRAW_PLACE,
        &SCHEDULE,
        &UNCONSUME,
        &SET_NOTICE,
        &BYPASS,
        &REVOKE,
        &SETTINGS,
        &VISITOR,
    ]
}

/// A script call ready for any client: EVALSHA sha numkeys KEYS... ARGV...
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The script to run.
    pub script: &'static Script,
    /// KEYS, all under the queue's hash tag.
    pub keys: Vec<String>,
    /// ARGV.
    pub args: Vec<String>,
}

impl PartialEq for Script {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// A typed script call: it builds the invocation and decodes the reply.
pub trait Operation {
    /// The decoded reply.
    type Reply;
    /// KEYS and ARGV for this call.
    fn invocation(&self) -> Invocation;
    /// Decodes the script's reply.
    fn decode(&self, value: Value) -> Result<Self::Reply, DecodeError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A script change changes its hash: this list makes every change a
    /// deliberate one (deployed workers and schedulers must be upgraded
    /// together when it moves; EVALSHA falls back to EVAL either way).
    #[test]
    fn hashes_are_pinned() {
        let pinned: Vec<(&str, &str)> = all().iter().map(|s| (s.name(), s.sha1())).collect();
        let computed: Vec<(&str, String)> = all()
            .iter()
            .map(|s| {
                (
                    s.name(),
                    sha1_smol::Sha1::from(s.source()).digest().to_string(),
                )
            })
            .collect();
        let computed: Vec<(&str, &str)> = computed.iter().map(|(n, h)| (*n, h.as_str())).collect();
        assert_eq!(
            pinned, computed,
            "script hashes changed: pin the new ones in `Script::new` if the change is intended"
        );
    }

    /// The script as written in `shared/lua/`, comments and all.
    fn written(name: &str) -> String {
        let path = format!("{}/lua/{name}.lua", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn every_script_opens_with_its_contract() {
        for s in all() {
            let text = written(s.name());
            let head = format!("-- {}:", s.name());
            let opens = text.starts_with(&head) || text.contains(&format!("\n{head}"));
            assert!(opens, "{} does not open with its contract", s.name());
            assert!(text.contains("KEYS[1]"), "{}", s.name());
            assert!(text.contains("Reply:"), "{}", s.name());
        }
    }

    #[test]
    fn scripts_ship_without_their_comment_lines() {
        for s in all() {
            let text = written(s.name());
            assert_eq!(
                s.body(),
                crate::lua_strip::strip_comment_lines(&text),
                "{}",
                s.name()
            );
            assert!(s.body().len() < text.len(), "{}", s.name());
            assert!(!s.body().lines().any(|l| l.trim_start().starts_with("--")));
        }
        assert_eq!(
            PRELUDE,
            crate::lua_strip::strip_comment_lines(&written("prelude"))
        );
        let kept = crate::lua_strip::strip_comment_lines(
            "-- why\n\nlocal a = 1 -- kept\n  -- indented\nreturn a",
        );
        assert_eq!(kept, "local a = 1 -- kept\nreturn a\n");
    }

    /// Every upper-case name a script uses with a contract prefix is one
    /// `fields.rs` declares: a typo would get no header line and fail as
    /// an undefined global in production, so it fails here.
    #[test]
    fn scripts_use_only_names_of_the_contract() {
        let defined = fields::lua_names();
        let texts = all().into_iter().map(|s| s.body()).chain([PRELUDE]);
        for text in texts {
            for word in lua::words(text) {
                let contract = [
                    "CF_", "SF_", "ST_", "TR_", "SR_", "QS_", "K_", "GF_", "OF_", "ORIGIN_",
                ]
                .iter()
                .any(|p| word.starts_with(p));
                if contract {
                    assert!(
                        defined.iter().any(|d| d == word),
                        "{word} is not in shared/src/fields.rs"
                    );
                }
            }
        }
    }

    /// Hash fields, status kinds and key names are never spelled in Lua:
    /// they come from the header, so they exist once.
    #[test]
    fn scripts_spell_no_contract_name_themselves() {
        let mut kinds: Vec<&str> = fields::status::ALL.iter().map(|(_, v)| *v).collect();
        // Key names the scripts derive themselves (the rest come as KEYS;
        // `waiting` is a reply kind too).
        let derived = crate::keys::name::ALL
            .iter()
            .filter(|(_, v)| v.ends_with(':'));
        kinds.extend(derived.map(|(_, v)| *v));
        for text in all().into_iter().map(|s| s.body()).chain([PRELUDE]) {
            for line in text.lines().filter(|l| !l.trim_start().starts_with("--")) {
                for literal in line.split('\'').skip(1).step_by(2) {
                    assert!(!kinds.contains(&literal), "{literal:?} spelled in: {line}");
                }
                for call in [
                    "'HGET'",
                    "'HMGET'",
                    "'HSET'",
                    "'HSETNX'",
                    "'HINCRBY'",
                    "'HDEL'",
                ] {
                    if let Some(at) = line.find(call) {
                        let args = &line[at + call.len()..];
                        let args = args.split(')').next().unwrap_or(args);
                        assert!(!args.contains('\''), "a hash field spelled in: {line}");
                    }
                }
            }
        }
    }

    /// Each script's header declares exactly the contract names its code
    /// (and the prelude, where included) reads, in the contract's order.
    #[test]
    fn each_header_declares_the_names_its_script_uses() {
        for s in all() {
            let prelude = if s.prelude { PRELUDE } else { "" };
            let header = &s.source()[..s.source().len() - prelude.len() - s.body().len()];
            let used: BTreeSet<&str> = lua::words(prelude).chain(lua::words(s.body())).collect();
            let declared: Vec<&str> = header
                .lines()
                .filter_map(|l| l.strip_prefix("local ")?.split(' ').next())
                .collect();
            let expected: Vec<String> = fields::lua_names()
                .into_iter()
                .filter(|n| used.contains(n.as_str()))
                .collect();
            assert_eq!(declared, expected, "{}", s.name());
        }
        assert!(
            !LEASE_RELEASE.source().contains("CF_"),
            "no prelude, no config"
        );
        assert!(
            CHALLENGE.source().contains("\nlocal CF_DRAW_SEED = "),
            "the prelude's seal"
        );
    }

    /// Redis's Lua allows 200 active locals per function (the whole script
    /// is one) and refuses more only at SCRIPT LOAD, in production: every
    /// script stays under this, leaving room for new settings and helpers.
    const LOCALS_BUDGET: usize = 150;

    /// `--nocapture` prints each script's counts.
    #[test]
    fn the_prelude_keeps_as_much_history_as_fields_says() {
        let trim = format!("'LTRIM', history, -{}, -1)", crate::fields::HISTORY_KEEP);
        assert!(
            PRELUDE.contains(&trim),
            "set_status must trim to HISTORY_KEEP"
        );
    }

    #[test]
    fn every_script_stays_within_the_locals_budget() {
        let mut over = Vec::new();
        for s in all() {
            let locals = lua::locals::count(s.source())
                .unwrap_or_else(|e| panic!("{}: cannot follow its blocks: {e}", s.name()));
            println!(
                "{:<14} {:>3} top-level locals, {:>3} at peak",
                s.name(),
                locals.top_level,
                locals.peak
            );
            if locals.peak > LOCALS_BUDGET {
                over.push(format!(
                    "{} ({} top-level, {} at peak)",
                    s.name(),
                    locals.top_level,
                    locals.peak
                ));
            }
        }
        assert!(
            over.is_empty(),
            "over the budget of {LOCALS_BUDGET} Lua locals: {}",
            over.join(", ")
        );
    }

    #[test]
    fn sha1_is_lowercase_hex_and_stable() {
        let s = ENTER.sha1();
        assert_eq!(s.len(), 40);
        assert!(s
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    }
}
