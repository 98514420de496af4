//! The Lua scripts, each loaded once with its SHA-1 computed once, and the
//! invocation (KEYS and ARGV) that a typed request builds for a runner.

use std::sync::OnceLock;

use crate::value::{DecodeError, Value};

/// One Lua script: its text and its SHA-1 for EVALSHA.
#[derive(Debug)]
pub struct Script {
    name: &'static str,
    source: &'static str,
    sha1: OnceLock<String>,
}

impl Script {
    const fn new(name: &'static str, source: &'static str) -> Self {
        Script {
            name,
            source,
            sha1: OnceLock::new(),
        }
    }

    /// Short name, for logs and errors.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source, for EVAL after a NOSCRIPT reply.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Lowercase hex SHA-1 of the source, as Redis computes it.
    pub fn sha1(&self) -> &str {
        self.sha1
            .get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }
}

// Scripts that describe a user's state share helpers; `concat!` prepends
// them so each script still runs as one self-contained EVAL.
macro_rules! with_prelude {
    ($file:literal) => {
        concat!(include_str!("../lua/prelude.lua"), include_str!($file))
    };
}

/// Takes a ticket (or returns the existing state).
pub static ENTER: Script = Script::new("enter", with_prelude!("../lua/enter.lua"));
/// Reports a user's state and marks them as seen.
pub static POSITION: Script = Script::new("position", with_prelude!("../lua/position.lua"));
/// One scheduler tick: sweeps, drops leavers, admits.
pub static ADMIT: Script = Script::new("admit", with_prelude!("../lua/admit.lua"));
/// Compare-and-delete of an entry token.
pub static CONSUME: Script = Script::new("consume", with_prelude!("../lua/consume.lua"));
/// Records the origin's outcome after a consume.
pub static SETTLE: Script = Script::new("settle", with_prelude!("../lua/settle.lua"));
/// Takes or extends the scheduler lease.
pub static LEASE_ACQUIRE: Script =
    Script::new("lease_acquire", include_str!("../lua/lease_acquire.lua"));
/// Extends the lease if still owned.
pub static LEASE_RENEW: Script = Script::new("lease_renew", include_str!("../lua/lease_renew.lua"));
/// Drops the lease if still owned.
pub static LEASE_RELEASE: Script =
    Script::new("lease_release", include_str!("../lua/lease_release.lua"));

/// Publishes settings without touching the operator's state.
pub static CONFIGURE: Script = Script::new("configure", include_str!("../lua/configure.lua"));
/// Switches the operator's queue state.
pub static SET_STATE: Script = Script::new("set_state", include_str!("../lua/set_state.lua"));

/// Every script, for preloading (SCRIPT LOAD) and the pinned-hash test.
pub fn all() -> [&'static Script; 10] {
    [
        &ENTER,
        &POSITION,
        &ADMIT,
        &CONSUME,
        &SETTLE,
        &LEASE_ACQUIRE,
        &LEASE_RENEW,
        &LEASE_RELEASE,
        &CONFIGURE,
        &SET_STATE,
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
        assert_eq!(
            pinned, PINNED,
            "script hashes changed; update PINNED if the change is intended"
        );
    }

    #[test]
    fn every_script_opens_with_its_contract() {
        for s in all() {
            let head = format!("-- {}:", s.name());
            let opens = s.source().starts_with(&head) || s.source().contains(&format!("\n{head}"));
            assert!(opens, "{} does not open with its contract", s.name());
            assert!(s.source().contains("KEYS[1]"), "{}", s.name());
            assert!(s.source().contains("Reply:"), "{}", s.name());
        }
    }

    #[test]
    fn sha1_is_lowercase_hex_and_stable() {
        let s = ENTER.sha1();
        assert_eq!(s.len(), 40);
        assert!(s
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert!(std::ptr::eq(ENTER.sha1(), ENTER.sha1()), "computed once");
    }

    const PINNED: &[(&str, &str)] = &[
        ("enter", "f20758d7bc80d4a003e3c55ae66bfaf5883ad50f"),
        ("position", "c2131b42e0a191f3d2cefa7e381d3f375a4bc158"),
        ("admit", "0d8cd1f424f7a5dd4e2241e41ae414425ffe40cf"),
        ("consume", "c520a1beb4407ab0b5771f92e620b94cedb0bfbe"),
        ("settle", "69e223e3a82dcffda305cfe44c089a93c61d4780"),
        ("lease_acquire", "6142fd947fbfecb64ea39aaa44341a9db68f13ca"),
        ("lease_renew", "17ea0368b83201fff1c7036adc35c519f8b81727"),
        ("lease_release", "e6e4e2b540e4715548f389149c65670d65a970f4"),
        ("configure", "d815438c7811a89831a8589b79c82ecff29997b1"),
        ("set_state", "81f2d1fda13857eec677ceb1115828aa9edee192"),
    ];
}
