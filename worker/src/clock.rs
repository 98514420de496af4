//! The time, from the runtime: `Date.now()` in one call. (workers-rs'
//! `Date::now()` builds a JS `Date` object and reads it with a second
//! call; a far-back poll asks for the time three times.)

use worker::js_sys;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    js_sys::Date::now() as u64
}
