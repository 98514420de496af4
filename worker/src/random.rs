//! The worker's one source of randomness: the runtime's CSPRNG,
//! `crypto.getRandomValues`, called directly (the `getrandom` crate's
//! browser and Node detection was code the wasm had no use for; the host
//! tests use `getrandom`). Every random byte the worker uses comes from
//! here, so a failure reads the same everywhere.

use queuegate_shared::token::EntryToken;

use crate::error::EdgeError;

/// `N` random bytes.
pub fn bytes<const N: usize>() -> Result<[u8; N], EdgeError> {
    let mut out = [0u8; N];
    fill(&mut out)?;
    Ok(out)
}

#[cfg(target_family = "wasm")]
fn fill(out: &mut [u8]) -> Result<(), EdgeError> {
    js::fill_random(out).map_err(|e| EdgeError::Internal(format!("crypto.getRandomValues: {e:?}")))
}

#[cfg(not(target_family = "wasm"))]
fn fill(out: &mut [u8]) -> Result<(), EdgeError> {
    getrandom::getrandom(out).map_err(|e| EdgeError::Internal(format!("getrandom: {e}")))
}

#[cfg(target_family = "wasm")]
mod js {
    use worker::wasm_bindgen;

    #[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function fill_random(out) {
  crypto.getRandomValues(out);
}
"#)]
    extern "C" {
        /// Fills `out` (a view of the wasm's memory, at most 64 KiB) from
        /// the runtime's CSPRNG.
        #[wasm_bindgen(catch)]
        pub fn fill_random(out: &mut [u8]) -> Result<(), wasm_bindgen::JsValue>;
    }
}

/// A fresh entry token.
pub fn token() -> Result<EntryToken, EdgeError> {
    Ok(EntryToken::from_random(bytes()?))
}

/// A uniform draw in `[0, 1)`.
pub fn unit() -> Result<f64, EdgeError> {
    Ok(unit_of(bytes()?))
}

/// `[0, 1)` from 8 random bytes: their top 53 bits, so every value is
/// exact in an f64.
fn unit_of(bytes: [u8; 8]) -> f64 {
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_stay_below_one() {
        assert_eq!(unit_of([0; 8]), 0.0);
        assert!(unit_of([0xff; 8]) < 1.0);
        assert_eq!(unit_of([0, 0, 0, 0, 0, 0, 0, 0x80]), 0.5);
        let u = unit().unwrap();
        assert!((0.0..1.0).contains(&u), "{u}");
        assert_ne!(bytes::<16>().unwrap(), bytes::<16>().unwrap());
    }
}
