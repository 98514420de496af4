//! The worker's static assets (wrangler.toml's `[assets]`, bound as
//! `ASSETS`): the waiting-room page's template and languages, and the Lua
//! scripts' text for EVAL after a NOSCRIPT reply. They are files beside the
//! worker rather than bytes in its wasm (about 20 KB gzipped: the wasm's
//! size target, BENCHMARKS.md), written by `scripts/build-worker` from what
//! the build checked (`examples/assets.rs`). Each file is read once per
//! isolate and kept; visitors never get them directly
//! (`run_worker_first`).

use std::cell::RefCell;
use std::rc::Rc;

use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, wasm_bindgen, Env};

use crate::error::EdgeError;

/// The binding's name, as wrangler.toml sets it.
pub const BINDING: &str = "ASSETS";

thread_local! {
    // One isolate, one thread; never borrowed across an await.
    static FETCHER: RefCell<Option<JsValue>> = const { RefCell::new(None) };
    static HELD: RefCell<Vec<(String, Rc<str>)>> = const { RefCell::new(Vec::new()) };
}

#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function asset_text(assets, path) {
  return assets.fetch("https://assets.invalid/" + path).then((r) => {
    if (r.status === 200) return r.text();
    if (r.body) r.body.cancel();
    throw r.status === 404 ? "404" : "answered " + r.status;
  }, (e) => {
    throw String((e && e.message) || e);
  });
}
"#)]
extern "C" {
    /// Resolves to the text of `path`; rejects with `"404"` when there is
    /// no such file, or with why it could not be read.
    fn asset_text(assets: &JsValue, path: &str) -> js_sys::Promise;
}

/// Keeps this isolate's `ASSETS` binding (once: it cannot change while the
/// isolate lives).
pub fn bind(env: &Env) {
    FETCHER.with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = js_sys::Reflect::get(env, &JsValue::from_str(BINDING))
                .ok()
                .filter(|b| b.is_object());
        }
    });
}

/// The text of the asset at `path` (from the assets' root, no leading
/// `/`). A worker deployed without its assets, or without the binding, is
/// misconfigured and says so.
pub async fn text(path: &str) -> Result<Rc<str>, EdgeError> {
    if let Some(held) = HELD.with(|h| {
        h.borrow()
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, t)| t.clone())
    }) {
        return Ok(held);
    }
    let fetcher = FETCHER.with(|f| f.borrow().clone()).ok_or_else(|| {
        EdgeError::Misconfigured(format!(
            "the {BINDING} binding is missing: deploy with wrangler.toml's [assets] (README, Deploying)"
        ))
    })?;
    let text = JsFuture::from(asset_text(&fetcher, path))
        .await
        .map_err(|e| match e.as_string().as_deref() {
            Some("404") => EdgeError::Misconfigured(format!(
                "the asset {path} is missing: deploy the assets scripts/build-worker wrote"
            )),
            other => EdgeError::Internal(format!(
                "the asset {path}: {}",
                other.unwrap_or("could not be read")
            )),
        })?
        .as_string()
        .ok_or_else(|| EdgeError::Internal(format!("the asset {path} is not text")))?;
    let text: Rc<str> = Rc::from(text);
    HELD.with(|h| h.borrow_mut().push((path.to_string(), text.clone())));
    Ok(text)
}
