//! The crates our entry module and build steps were written against are
//! the ones Cargo.lock resolves: `worker` and `worker-macros` at the
//! workers-rs release, `wasm-bindgen` at the wasm-bindgen CLI version, both
//! as scripts/lib.sh pins them (docs/edge.md, "The build").

use std::path::Path;

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `NAME="value"` from scripts/lib.sh.
fn pinned(name: &str) -> String {
    read("scripts/lib.sh")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("scripts/lib.sh sets no {name}"))
        .trim_matches('"')
        .to_string()
}

/// Every version of `package` in Cargo.lock.
fn locked(package: &str) -> Vec<String> {
    let lock: toml::Table = read("Cargo.lock").parse().expect("Cargo.lock is TOML");
    lock["package"]
        .as_array()
        .expect("[[package]] entries")
        .iter()
        .filter(|p| p["name"].as_str() == Some(package))
        .map(|p| p["version"].as_str().expect("a version").to_string())
        .collect()
}

#[test]
fn cargo_lock_resolves_the_versions_the_entry_and_tools_were_written_for() {
    let workers_rs = pinned("WORKERS_RS_VERSION");
    let bindgen = pinned("WASM_BINDGEN_VERSION");
    for (package, want) in [
        ("worker", &workers_rs),
        ("worker-macros", &workers_rs),
        ("wasm-bindgen", &bindgen),
    ] {
        assert_eq!(
            locked(package),
            std::slice::from_ref(want),
            "Cargo.lock resolves {package} other than {want}, the version scripts/lib.sh \
             pins: follow docs/edge.md, \"The build\", to upgrade"
        );
    }
}

#[test]
fn the_workspace_pins_them_exactly() {
    let manifest: toml::Table = read("Cargo.toml").parse().expect("Cargo.toml is TOML");
    let deps = manifest["workspace"]["dependencies"]
        .as_table()
        .expect("[workspace.dependencies]");
    for package in ["worker", "worker-macros", "wasm-bindgen"] {
        let spec = deps[package]
            .as_str()
            .unwrap_or_else(|| panic!("{package}"));
        assert!(
            spec.starts_with('='),
            "{package} = {spec:?} is not pinned with ="
        );
    }
}
