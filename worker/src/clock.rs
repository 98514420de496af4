//! The time, from the runtime: `Date.now()` in one call (workers-rs'
//! `Date::now()` builds a JS `Date` object and reads it with a second
//! call; a far-back poll asks for the time three times), and a pause on
//! the runtime's own timer.

use worker::js_sys;
use worker::wasm_bindgen_futures::JsFuture;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    js_sys::Date::now() as u64
}

/// Resolves after `ms` milliseconds (`setTimeout`; in `wait_until` work,
/// so a pause holds no reply back).
pub async fn sleep(ms: u32) {
    let _ = JsFuture::from(js::sleep(ms)).await;
}

mod js {
    use worker::{js_sys, wasm_bindgen};

    #[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
"#)]
    extern "C" {
        /// A promise resolved after `ms` milliseconds.
        pub fn sleep(ms: u32) -> js_sys::Promise;
    }
}
