//! The `[beacon]` section: the drand HTTP endpoint and chain whose rounds
//! `schedule --beacon drand` names (docs/scheduler.md, *The draw's beacon*).

use serde::Deserialize;

use super::{ConfigError, Origin};

/// A drand chain served over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeaconConfig {
    /// The endpoint, e.g. `https://api.drand.sh` (no trailing slash).
    pub url: String,
    /// The chain's hash (hex), e.g. quicknet's.
    pub chain_hash: String,
}

impl BeaconConfig {
    /// `{url}/{chain hash}`: how a commitment names the beacon.
    pub fn source(&self) -> String {
        format!("{}/{}", self.url, self.chain_hash)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBeacon {
    url: String,
    chain_hash: String,
}

pub(super) fn beacon_config(raw: RawBeacon, at: Origin<'_>) -> Result<BeaconConfig, ConfigError> {
    let url = raw.url.trim_end_matches('/').to_string();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(at.invalid(
            "[beacon] url",
            format!("{url:?} is not an http(s) address like \"https://api.drand.sh\""),
        ));
    }
    if raw.chain_hash.len() != 64 || hex::decode(&raw.chain_hash).is_err() {
        return Err(at.invalid(
            "[beacon] chain_hash",
            format!("{:?} is not a chain hash (64 hex digits)", raw.chain_hash),
        ));
    }
    Ok(BeaconConfig {
        url,
        chain_hash: raw.chain_hash.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn the_beacon_section_is_checked() {
        let parse = |t: &str| {
            Config::parse(
                &format!("{t}\n[[queue]]\nid = \"main\"\n"),
                "t.toml",
                |_| None,
            )
        };
        let chain = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971";
        let ok = parse(&format!(
            "[beacon]\nurl = \"https://api.drand.sh/\"\nchain_hash = \"{chain}\"\n"
        ))
        .unwrap();
        let b = ok.beacon.unwrap();
        assert_eq!(b.source(), format!("https://api.drand.sh/{chain}"));
        assert!(parse("").unwrap().beacon.is_none());
        for bad in [
            format!("[beacon]\nurl = \"api.drand.sh\"\nchain_hash = \"{chain}\"\n"),
            "[beacon]\nurl = \"https://api.drand.sh\"\nchain_hash = \"abc\"\n".to_string(),
        ] {
            let err = parse(&bad).unwrap_err().to_string();
            assert!(err.contains("[beacon]"), "{err}");
        }
    }
}
