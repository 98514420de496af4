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
    "d5cb271c7cbabc8bf587cad277cf22c30534b03e",
);
/// Reports a user's state and marks them as seen.
pub static POSITION: Script = Script::new(
    "position",
    true,
    shipped!("position"),
    "9e2c70ebf1c18db456aea30b0158808c2572d3f9",
);
/// One scheduler tick: sweeps, drops leavers, admits.
pub static ADMIT: Script = Script::new(
    "admit",
    true,
    shipped!("admit"),
    "eec381da0dffb935932dc85d4f2b0cb8958d0274",
);
/// Compare-and-delete of an entry token.
pub static CONSUME: Script = Script::new(
    "consume",
    true,
    shipped!("consume"),
    "22994a399f339a65e6e49e3d533777c62ba4b2e4",
);
/// Records the origin's outcome after a consume.
pub static SETTLE: Script = Script::new(
    "settle",
    true,
    shipped!("settle"),
    "19e7396c0d7b708037a9d8d5c40466cbe2c5d62e",
);
/// Takes or extends the scheduler lease.
pub static LEASE_ACQUIRE: Script = Script::new(
    "lease_acquire",
    false,
    shipped!("lease_acquire"),
    "a2a718580c1ac81b7fd0bb53a2ef909e1ceb6d36",
);
/// Drops the lease if still owned.
pub static LEASE_RELEASE: Script = Script::new(
    "lease_release",
    false,
    shipped!("lease_release"),
    "0b6856bae609a74eca4c4a8eecd99e4cb3a47e6b",
);

/// Publishes the lease holder's config file: its settings' fingerprint,
/// and its schedule, never over a newer one.
pub static PUBLISH_FILE: Script = Script::new(
    "publish_file",
    true,
    shipped!("publish_file"),
    "92889bcc4cf06ea5b4a97939353f29c6eefdc097",
);
/// Publishes settings without touching the operator's state.
pub static CONFIGURE: Script = Script::new(
    "configure",
    true,
    shipped!("configure"),
    "0f7e46d94913f0ea667b6cfd05594f001db4578d",
);
/// Reads a new proof-of-work challenge's terms.
pub static CHALLENGE: Script = Script::new(
    "challenge",
    true,
    shipped!("challenge"),
    "fc798b4ee85da51aa8b3d42ba98912f62e1387c3",
);
/// Reads what the operator's `status` shows.
pub static STATUS: Script = Script::new(
    "status",
    false,
    shipped!("status"),
    "1e125451ac2e1732da7f20ebf177d854d68a6309",
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
    "0fafe47f88fadd60498545a266bb4fedc282156d",
);

/// Idle passthrough of a token-less protected request.
pub static PASS: Script = Script::new(
    "pass",
    true,
    shipped!("pass"),
    "944efbcdadb4ab547427164df4f0e846620b83f2",
);
/// Seals a pre-queue after its opening and fixes the draw's seed.
pub static DRAW_OPEN: Script = Script::new(
    "draw_open",
    true,
    shipped!("draw_open"),
    "546bbd4a5528f224114581dd0192e7181550121c",
);
/// Places one batch of a running draw.
pub static DRAW_PLACE: Script = Script::new(
    "draw_place",
    true,
    shipped!("draw_place"),
    "d1f1900f8744c241f16f428efc93e7b68bec4332",
);
/// Deals a sealed draw's seats among each address group's identities.
pub static DRAW_SHUFFLE: Script = Script::new(
    "draw_shuffle",
    true,
    shipped!("draw_shuffle"),
    "2d7a5f31f9362a1561dec4ac0bf11837304205ef",
);
/// Writes a sealed draw's public record, then reveals its seed.
pub static DRAW_REVEAL: Script = Script::new(
    "draw_reveal",
    true,
    shipped!("draw_reveal"),
    "e254d2060464b8522be6ebc5dd8fee8034122023",
);
/// Sets or clears a queue's opening and closing.
pub static SCHEDULE: Script = Script::new(
    "schedule",
    false,
    shipped!("schedule"),
    "8071c21e24807e6fc4198faf8977828574a2883d",
);
/// Sets or clears the operator's notice to the line.
pub static SET_NOTICE: Script = Script::new(
    "set_notice",
    false,
    shipped!("set_notice"),
    "7ebc17ae5284493facf452cfbd37107ba1cf8b23",
);
/// Gives back a token whose consume's reply was lost.
pub static UNCONSUME: Script = Script::new(
    "unconsume",
    true,
    shipped!("unconsume"),
    "bd44131e764740825e779dde7345f98a9accda29",
);

/// A browse route's session check.
pub static BROWSE: Script = Script::new(
    "browse",
    true,
    shipped!("browse"),
    "60a6224d0e2fbecda461278233b31fd106726544",
);

/// Checks, uses, creates and revokes bypass links.
pub static BYPASS: Script = Script::new(
    "bypass",
    true,
    shipped!("bypass"),
    "ce04069f4fd25873ac6a146f226e1d8b99220f8a",
);

/// Revokes a visitor (ends its place or token) or lifts a revocation.
pub static REVOKE: Script = Script::new(
    "revoke",
    true,
    shipped!("revoke"),
    "e51e6744445998464f2209ede8c0905dafd2bb2b",
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
    "92dafd99639ef026c8e79b480b4421587c56c7ac",
);

/// Sets, adds to, refunds, clears or reads a queue's stock.
pub static STOCK: Script = Script::new(
    "stock",
    true,
    shipped!("stock"),
    "8030fb13710ec0ac90f3d9fd379ddc382db0c658",
);

/// Every script, for preloading (SCRIPT LOAD) and the pinned-hash test.
pub fn all() -> [&'static Script; 27] {
    [
        &ENTER,
        &POSITION,
        &ADMIT,
        &CONSUME,
        &SETTLE,
        &LEASE_ACQUIRE,
        &LEASE_RELEASE,
        &CONFIGURE,
        &PUBLISH_FILE,
        &SET_STATE,
        &STATUS,
        &CHALLENGE,
        &ORIGIN_WINDOW,
        &PASS,
        &DRAW_OPEN,
        &DRAW_PLACE,
        &DRAW_SHUFFLE,
        &DRAW_REVEAL,
        &SCHEDULE,
        &UNCONSUME,
        &SET_NOTICE,
        &BYPASS,
        &REVOKE,
        &SETTINGS,
        &VISITOR,
        &BROWSE,
        &STOCK,
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
                    "CFG_", "R_", "AA_", "AR_", "WR_", "PR_", "AD_", "CR_",
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

    /// Every `TABLE.FIELD` of a contract table (reply tags `R`, the
    /// records of shared/src/records.rs) names a field Rust declares: an
    /// unknown one would read nil, silently. A table is only read by field.
    #[test]
    fn scripts_use_only_fields_of_the_contract_tables() {
        let tables = fields::lua_table_fields();
        for s in all() {
            for text in [s.body(), PRELUDE] {
                let tokens: Vec<lua::Token<'_>> = lua::tokens(text).collect();
                for (i, t) in tokens.iter().enumerate() {
                    let Some((table, fields)) = tables.iter().find(|(n, _)| *n == t.text) else {
                        continue;
                    };
                    let field = match (tokens.get(i + 1), tokens.get(i + 2)) {
                        (Some(dot), Some(field)) if dot.text == "." => field.text,
                        _ => panic!("{}:{}: {table} not read by field", s.name(), t.line),
                    };
                    assert!(
                        fields.iter().any(|f| f == field),
                        "{}:{}: {table}.{field} is not in shared/src (records.rs, reply.rs)",
                        s.name(),
                        t.line
                    );
                }
            }
        }
    }

    /// A reply's tag comes from `R` ([`ReplyKind`]), never a literal: a
    /// script cannot send a tag Rust does not decode, and every tag is
    /// sent by some script.
    ///
    /// [`ReplyKind`]: crate::reply::ReplyKind
    #[test]
    fn scripts_return_only_tags_of_the_contract() {
        let texts: Vec<&str> = all()
            .into_iter()
            .map(|s| s.body())
            .chain([PRELUDE])
            .collect();
        for text in &texts {
            for line in text.lines().filter(|l| !l.trim_start().starts_with("--")) {
                assert!(!line.contains("{'"), "a literal reply field in: {line}");
                for literal in line.split('\'').skip(1).step_by(2) {
                    assert!(
                        crate::reply::ReplyKind::parse(literal).is_none(),
                        "reply tag {literal:?} spelled in: {line}"
                    );
                }
            }
        }
        let fields: Vec<String> = texts
            .iter()
            .flat_map(|t| {
                lua::tokens(t)
                    .collect::<Vec<_>>()
                    .windows(3)
                    .filter(|w| w[0].text == "R" && w[1].text == ".")
                    .map(|w| w[2].text.to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        for kind in crate::reply::ReplyKind::ALL {
            assert!(fields.contains(&kind.lua_field()), "no script sends {kind}");
        }
    }

    /// Records and hash reads are indexed by their generated names
    /// (`f[TR_TOKEN]`, `cfg[CF_STATE]`, `ARGV[AA.RATE]`), never by a bare
    /// number, so a moved field cannot be misread. A number indexes only
    /// KEYS, the ARGV of scripts whose arguments are not a declared record,
    /// and the replies whose positions Redis itself defines (listed here).
    #[test]
    fn records_are_indexed_by_name_not_by_number() {
        let redis_replies = [
            ("prelude", "t"),   // TIME
            ("prelude", "top"), // ZRANGE WITHSCORES
            ("prelude", "got"), // HMGET of a /56's and a /48's counts
            ("admit", "at"),
            ("admit", "last"),
            ("admit", "at_rank"),
            ("admit", "page"),        // HSCAN
            ("enter", "got"),         // HMGET of an address and a solution field
            ("set_notice", "before"), // HMGET of the notice's two fields
        ];
        let declared_args = ["admit"];
        let texts = all()
            .into_iter()
            .map(|s| (s.name(), s.body()))
            .chain([("prelude", PRELUDE)]);
        for (name, text) in texts {
            let tokens: Vec<lua::Token<'_>> = lua::tokens(text).collect();
            for w in tokens.windows(4) {
                let number = w[2].text.bytes().next().is_some_and(|b| b.is_ascii_digit());
                if !(w[0].word && w[1].text == "[" && number && w[3].text == "]") {
                    continue;
                }
                let var = w[0].text;
                let allowed = var == "KEYS"
                    || (var == "ARGV" && !declared_args.contains(&name))
                    || redis_replies.contains(&(name, var));
                assert!(
                    allowed,
                    "{name}:{}: {var}[{}] reads a record by number: use its generated name \
                     (shared/src/fields.rs, records.rs)",
                    w[0].line, w[2].text
                );
            }
        }
    }

    #[test]
    fn the_number_check_sees_a_bare_index() {
        let bad = "local cfg = read_config(KEYS[1])\nreturn cfg[2]";
        let hits: Vec<&str> = lua::tokens(bad)
            .collect::<Vec<_>>()
            .windows(4)
            .filter(|w| w[1].text == "[" && w[2].text == "2")
            .map(|w| w[0].text)
            .collect();
        assert_eq!(hits, ["cfg"]);
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
    /// script stays under this, leaving room for new settings and helpers
    /// (raised from 150 when the admit script reached it with the session:
    /// 25 spare is still more than any one change has needed; the next
    /// step is a table of config names, one local like `R`).
    const LOCALS_BUDGET: usize = 175;

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
