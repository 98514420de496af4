//! drand's HTTP API, as the scheduler reads it (docs/drop-day.md, *The
//! beacon*): `schedule --beacon drand` names the first round after the
//! opening from the chain's `info`; the reveal reads that round's value,
//! each attempt bounded, and waits (tick after tick) until it is out.

use std::time::Duration;

use queuegate_shared::beacon::{BeaconRound, ChainInfo, RoundValue};

use crate::config::BeaconConfig;

/// How long one request to the beacon may take.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// A beacon request that did not give what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BeaconError {
    /// Unreachable, timed out, or not the JSON asked for.
    #[error("{url}: {message}")]
    Fetch {
        /// What was asked.
        url: String,
        /// Why it failed.
        message: String,
    },
    /// The round is not out yet, or the reply is not its 32 bytes.
    #[error("{url}: no value for round {round} yet")]
    NotYet {
        /// What was asked.
        url: String,
        /// The round.
        round: u64,
    },
}

async fn get<T: serde::de::DeserializeOwned>(url: &str) -> Result<T, BeaconError> {
    let fail = |e: reqwest::Error| BeaconError::Fetch {
        url: url.to_string(),
        message: e.without_url().to_string(),
    };
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(fail)?;
    client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(fail)?
        .json()
        .await
        .map_err(fail)
}

/// The round `beacon` names for an opening at `opens_at_ms`: the first
/// published after it.
pub async fn round_for(
    beacon: &BeaconConfig,
    opens_at_ms: u64,
) -> Result<BeaconRound, BeaconError> {
    let url = format!("{}/info", beacon.source());
    let info: ChainInfo = get(&url).await?;
    let round = info.round_after(opens_at_ms).ok_or(BeaconError::Fetch {
        url,
        message: "a period of 0".into(),
    })?;
    Ok(BeaconRound {
        source: beacon.source(),
        round,
    })
}

/// The named round's value (hex), once published.
pub async fn value_of(round: &BeaconRound) -> Result<String, BeaconError> {
    let url = round.url();
    let reply: Result<RoundValue, _> = get(&url).await;
    match reply {
        Ok(v) => v.value_of(round.round).ok_or(BeaconError::NotYet {
            url,
            round: round.round,
        }),
        Err(e) => Err(e),
    }
}
