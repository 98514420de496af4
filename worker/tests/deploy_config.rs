//! The committed deploy files pass the worker's own validation:
//! `wrangler.toml`'s `[vars]` with `.dev.vars.example`'s secrets make a
//! valid edge config in both identity modes, and `main` is the bundle
//! scripts/build-worker writes.

use std::collections::BTreeMap;

use queuegate_worker::config::EdgeConfig;

fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn wrangler_toml() -> toml::Table {
    read("wrangler.toml")
        .parse()
        .expect("wrangler.toml is TOML")
}

/// `NAME="value"` lines of a dotenv file.
fn dev_vars(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

fn config_with(mode: &str) -> Result<EdgeConfig, String> {
    let table = wrangler_toml();
    let vars = table["vars"].as_table().expect("[vars] table");
    let mut env: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("string var").to_string()))
        .collect();
    env.extend(dev_vars(&read(".dev.vars.example")));
    env.insert("IDENTITY_MODE".into(), mode.into());
    EdgeConfig::from_lookup(|name| env.get(name).cloned()).map_err(|e| format!("{e:?}"))
}

#[test]
fn the_example_secrets_and_vars_are_accepted_in_both_identity_modes() {
    for mode in ["anonymous", "jwt"] {
        if let Err(e) = config_with(mode) {
            panic!("{mode}: wrangler.toml + .dev.vars.example rejected: {e}");
        }
    }
}

#[test]
fn main_is_the_built_bundle_and_the_build_is_watched() {
    let table = wrangler_toml();
    assert_eq!(table["main"].as_str(), Some("worker/build/index.js"));
    let build = table["build"].as_table().expect("[build]");
    let watched = build["watch_dir"].as_array().expect("watch_dir list");
    for dir in watched {
        let dir = dir.as_str().expect("a path");
        assert!(repo_root().join(dir).is_dir(), "watch_dir {dir} missing");
    }
}
