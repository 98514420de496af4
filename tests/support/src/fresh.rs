//! A test never runs yesterday's build: before a process starts, its
//! artefact (a workspace binary, the worker's wasm bundle) must be newer
//! than every source it is built from, or the test fails naming the file
//! that changed and the command that rebuilds it.
//!
//! A binary's sources are the files of its package and of every workspace
//! package it depends on (normal and build dependencies, transitively, as
//! `cargo metadata` lists them), less their tests, examples, benches and
//! build output, plus the workspace's `Cargo.toml` and `Cargo.lock`. The
//! worker's bundle adds the files its manifest lists as
//! `[package.metadata.queuegate] build-inputs` (the build scripts): that
//! list is the one `scripts/dev` decides a rebuild by, through
//! [`worker_stale`] (the `queuegate-worker-fresh` binary).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use serde_json::Value;

use crate::paths::repo_root;

/// Folders of a package that its library and binaries are not built from.
const NOT_SOURCES: &[&str] = &[
    "tests",
    "examples",
    "benches",
    "target",
    "build",
    "build-probe",
    "node_modules",
];

/// The worker's package: its manifest lists the bundle's other inputs.
const WORKER_PACKAGE: &str = "queuegate-worker";

/// Why an artefact cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// It is not there.
    Missing(PathBuf),
    /// `source` changed after `artefact` was built.
    Older {
        /// The artefact.
        artefact: PathBuf,
        /// The newest source that is newer than it.
        source: PathBuf,
    },
}

impl Stale {
    /// One line for a failing test: what is wrong and `command` to fix it.
    pub fn explain(&self, command: &str) -> String {
        match self {
            Stale::Missing(a) => format!("{} is not built: run `{command}`", a.display()),
            Stale::Older { artefact, source } => format!(
                "{} is older than {}, which changed after it was built: run `{command}` \
                 (scripts/test does)",
                artefact.display(),
                source.display()
            ),
        }
    }
}

/// Ok when every one of `artefacts` exists and none is older than the
/// newest of `sources`.
pub fn check(artefacts: &[PathBuf], sources: &[PathBuf]) -> Result<(), Stale> {
    let mut oldest: Option<(SystemTime, &PathBuf)> = None;
    for a in artefacts {
        let built = modified(a).ok_or_else(|| Stale::Missing(a.clone()))?;
        if oldest.is_none_or(|(t, _)| built < t) {
            oldest = Some((built, a));
        }
    }
    let Some((built, artefact)) = oldest else {
        return Ok(());
    };
    let newest = sources
        .iter()
        .filter_map(|s| Some((modified(s)?, s)))
        .max_by_key(|(t, _)| *t);
    match newest {
        Some((changed, source)) if changed > built => Err(Stale::Older {
            artefact: artefact.clone(),
            source: source.clone(),
        }),
        _ => Ok(()),
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).ok()?.modified().ok()
}

/// Panics, naming the changed source and the command, unless the binary
/// `bin` (at `path`) is newer than everything it is built from.
pub fn assert_bin_fresh(bin: &str, path: &Path) {
    // Cargo's own list of what went into the binary, when it wrote one: it
    // leaves out files compiled only for tests, which a rebuild would not
    // touch. Otherwise the package scan (a superset).
    let sources = dep_info(path).unwrap_or_else(|| bin_sources(bin));
    if let Err(stale) = check(&[path.to_path_buf()], &sources) {
        panic!("{}", stale.explain("cargo build --workspace --bins"));
    }
}

/// Panics unless the worker bundle in `dir` (`index.js` and its wasm) is
/// newer than everything it is built from; `command` rebuilds it.
pub fn assert_worker_fresh(dir: &Path, command: &str) {
    if let Err(stale) = worker_stale(dir) {
        panic!("{}", stale.explain(command));
    }
}

/// Ok when the worker bundle in `dir` exists and is newer than every
/// file it is built from ([`worker_inputs`]).
pub fn worker_stale(dir: &Path) -> Result<(), Stale> {
    // The assets are written last; one file of each kind stands for them.
    let artefacts = [
        dir.join("index.js"),
        dir.join("index_bg.wasm"),
        dir.join("assets/page/waiting-room.html"),
        dir.join("assets/lua/enter.lua"),
    ];
    check(&artefacts, &worker_inputs())
}

/// Everything the worker's bundle is built from: its package's sources
/// and its manifest's `build-inputs`.
pub fn worker_inputs() -> Vec<PathBuf> {
    let mut sources = package_sources(WORKER_PACKAGE);
    let root = repo_root();
    let listed = workspace().build_inputs.get(WORKER_PACKAGE);
    sources.extend(listed.into_iter().flatten().map(|f| root.join(f)));
    sources
}

/// The files cargo's dep-info (`<binary>.d` beside it) lists for `binary`,
/// if it wrote one: `target: a.rs b\ c.rs …` with spaces escaped.
fn dep_info(binary: &Path) -> Option<Vec<PathBuf>> {
    let mut name = binary.file_name()?.to_os_string();
    name.push(".d");
    let text = std::fs::read_to_string(binary.with_file_name(name)).ok()?;
    let (_, deps) = text.lines().next()?.split_once(": ")?;
    let mut files = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            ' ' => {
                if !current.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        files.push(PathBuf::from(current));
    }
    (!files.is_empty()).then_some(files)
}

/// The workspace as `cargo metadata` describes it, read once per process.
struct Workspace {
    /// Package name → its folder and the workspace packages it depends on.
    packages: HashMap<String, (PathBuf, Vec<String>)>,
    /// Binary target name → its package.
    bins: HashMap<String, String>,
    /// Package name → the files besides its sources that its artefacts
    /// are built from (`[package.metadata.queuegate] build-inputs`).
    build_inputs: HashMap<String, Vec<String>>,
}

fn workspace() -> &'static Workspace {
    static WORKSPACE: OnceLock<Workspace> = OnceLock::new();
    WORKSPACE.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--offline",
            ])
            .current_dir(repo_root())
            .output()
            .expect("run cargo metadata");
        assert!(
            out.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
        parse_workspace(&meta)
    })
}

fn parse_workspace(meta: &Value) -> Workspace {
    let mut packages = HashMap::new();
    let mut bins = HashMap::new();
    let mut build_inputs = HashMap::new();
    let empty = Vec::new();
    let list = |v: &Value, key: &str| v[key].as_array().unwrap_or(&empty).clone();
    for p in list(meta, "packages") {
        let name = p["name"].as_str().unwrap_or_default().to_string();
        let dir = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default())
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        // Path dependencies that are not dev-only: what its code is built from.
        let deps = list(&p, "dependencies")
            .iter()
            .filter(|d| d["path"].is_string() && d["kind"].as_str() != Some("dev"))
            .filter_map(|d| d["name"].as_str().map(str::to_string))
            .collect();
        for t in list(&p, "targets") {
            let is_bin = list(&t, "kind").iter().any(|k| k == "bin");
            if let (true, Some(bin)) = (is_bin, t["name"].as_str()) {
                bins.insert(bin.to_string(), name.clone());
            }
        }
        let inputs: Vec<String> = list(&p["metadata"]["queuegate"], "build-inputs")
            .iter()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect();
        if !inputs.is_empty() {
            build_inputs.insert(name.clone(), inputs);
        }
        packages.insert(name, (dir, deps));
    }
    Workspace {
        packages,
        bins,
        build_inputs,
    }
}

/// The sources of binary `bin`'s package (see the module's doc).
fn bin_sources(bin: &str) -> Vec<PathBuf> {
    let ws = workspace();
    let package = ws
        .bins
        .get(bin)
        .unwrap_or_else(|| panic!("no workspace package builds a binary named {bin}"));
    package_sources(package)
}

/// Every source file of `package` and the workspace packages it depends on.
fn package_sources(package: &str) -> Vec<PathBuf> {
    static CACHE: OnceLock<Mutex<HashMap<String, Vec<PathBuf>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    if let Some(hit) = cache.lock().expect("source cache").get(package) {
        return hit.clone();
    }
    let ws = workspace();
    let mut seen = BTreeSet::new();
    let mut todo = vec![package.to_string()];
    while let Some(p) = todo.pop() {
        if let Some((_, deps)) = ws.packages.get(&p) {
            if seen.insert(p) {
                todo.extend(deps.iter().cloned());
            }
        }
    }
    let root = repo_root();
    let mut files = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    for p in &seen {
        if let Some((dir, _)) = ws.packages.get(p) {
            collect(dir, &mut files);
        }
    }
    cache
        .lock()
        .expect("source cache")
        .insert(package.to_string(), files.clone());
    files
}

/// Files below `dir`, less [`NOT_SOURCES`] folders and prose.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() && !NOT_SOURCES.contains(&name.as_ref()) => collect(&path, out),
            Ok(t) if t.is_dir() => {}
            Ok(_) if !name.ends_with(".md") => out.push(path),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::time::Duration;

    fn touch(path: &Path, at: SystemTime) {
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("create");
        f.set_modified(at).expect("set mtime");
    }

    #[test]
    fn an_artefact_older_than_a_source_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = SystemTime::now() - Duration::from_secs(100);
        let (bin, wasm) = (dir.path().join("bin"), dir.path().join("wasm"));
        let (a, b) = (dir.path().join("a.rs"), dir.path().join("b.lua"));
        touch(&a, t0);
        touch(&b, t0 + Duration::from_secs(10));
        touch(&bin, t0 + Duration::from_secs(20));
        assert_eq!(
            check(std::slice::from_ref(&bin), &[a.clone(), b.clone()]),
            Ok(())
        );
        touch(&b, t0 + Duration::from_secs(30));
        assert_eq!(
            check(std::slice::from_ref(&bin), &[a.clone(), b.clone()]),
            Err(Stale::Older {
                artefact: bin.clone(),
                source: b.clone()
            })
        );
        // Of two artefacts the older one counts.
        touch(&wasm, t0 + Duration::from_secs(40));
        touch(&bin, t0 + Duration::from_secs(25));
        assert!(check(&[wasm.clone(), bin.clone()], std::slice::from_ref(&b)).is_err());
        touch(&bin, t0 + Duration::from_secs(45));
        assert_eq!(check(&[wasm, bin], &[a, b]), Ok(()));
        let gone = dir.path().join("gone");
        assert_eq!(
            check(std::slice::from_ref(&gone), &[]),
            Err(Stale::Missing(gone))
        );
        let why = Stale::Missing("x".into()).explain("scripts/build-worker");
        assert!(why.contains("`scripts/build-worker`"), "{why}");
    }

    /// Every repo file scripts/build-worker names is a declared input of
    /// the bundle (or a source of the worker's packages), and wrangler.toml's
    /// `watch_dir` covers every folder of sources: a new build file or
    /// package folder cannot be left out of one list and not the other.
    #[test]
    fn the_worker_bundle_inputs_are_the_ones_its_build_reads() {
        let root = repo_root();
        let inputs = worker_inputs();
        for f in &workspace().build_inputs[WORKER_PACKAGE] {
            assert!(
                root.join(f).is_file(),
                "build-inputs lists {f}, which is not a file"
            );
        }
        let script = std::fs::read_to_string(root.join("scripts/build-worker")).unwrap();
        let named: BTreeSet<&str> = script
            .split("$QG_ROOT/")
            .skip(1)
            .filter_map(|rest| {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || "._/-".contains(c)))
                    .unwrap_or(rest.len());
                let path = rest[..end].trim_end_matches('/');
                (!path.is_empty()).then_some(path)
            })
            .collect();
        assert!(named.contains("scripts/entry-check.mjs"), "{named:?}");
        for path in named {
            // Where it builds, the tools it runs, and the deploy config it
            // only checks (the bundle does not change with it).
            let not_an_input = ["worker", "wrangler.toml"].contains(&path)
                || path.starts_with("node_modules/")
                || path.starts_with("worker/$out");
            if not_an_input {
                continue;
            }
            assert!(
                inputs.contains(&root.join(path)),
                "scripts/build-worker reads {path}, which is not in worker/Cargo.toml's build-inputs"
            );
        }
        let config: toml::Table = std::fs::read_to_string(root.join("wrangler.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let wrangler: Vec<&str> = config["build"]["watch_dir"]
            .as_array()
            .expect("wrangler.toml's [build] watch_dir is a list")
            .iter()
            .filter_map(|d| d.as_str())
            .collect();
        for source in package_sources(WORKER_PACKAGE) {
            let Ok(rel) = source.strip_prefix(&root) else {
                continue;
            };
            let parts: Vec<_> = rel.iter().collect();
            if parts.len() < 3 {
                continue; // a package's root file (manifest, build.rs, entry.js)
            }
            let folder = format!(
                "{}/{}",
                parts[0].to_string_lossy(),
                parts[1].to_string_lossy()
            );
            assert!(
                wrangler.contains(&folder.as_str()),
                "wrangler.toml's [build] watch_dir lacks {folder} ({} is a source)",
                rel.display()
            );
        }
    }

    #[test]
    fn dep_info_lists_the_files_cargo_built_from() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("tool");
        std::fs::write(
            dir.path().join("tool.d"),
            "/t/tool: /r/src/main.rs /r/my\\ dir/lib.rs /r/lua/a.lua\n\n/r/src/main.rs:\n",
        )
        .unwrap();
        assert_eq!(
            dep_info(&bin),
            Some(vec![
                PathBuf::from("/r/src/main.rs"),
                PathBuf::from("/r/my dir/lib.rs"),
                PathBuf::from("/r/lua/a.lua"),
            ])
        );
        assert_eq!(dep_info(&dir.path().join("none")), None);
    }

    #[test]
    fn a_binary_is_built_from_its_package_and_the_workspace_packages_it_uses() {
        let root = repo_root();
        let sources = bin_sources("queuegate-scheduler");
        let has = |f: &str| sources.contains(&root.join(f));
        assert!(has("scheduler/src/main.rs"));
        assert!(has("shared/src/settings.rs"), "a dependency's sources");
        assert!(has("shared/lua/admit.lua"), "include_str! files");
        assert!(has("Cargo.lock"));
        assert!(
            !sources.iter().any(|s| s.starts_with(root.join("worker"))),
            "the scheduler does not use the worker"
        );
        assert!(
            !sources
                .iter()
                .any(|s| s.starts_with(root.join("tests/support"))),
            "a dev-dependency is not a source"
        );
        let worker = package_sources("queuegate-worker");
        assert!(worker.contains(&root.join("worker/entry.js")));
        assert!(worker.contains(&root.join("worker/assets/waiting-room.html")));
        assert!(worker.contains(&root.join("edge/src/altcha.rs")));
        assert!(!worker
            .iter()
            .any(|s| s.starts_with(root.join("worker/build"))));
        // A package's own tests are not built into it.
        let system = package_sources("queuegate-system-tests");
        assert!(system.contains(&root.join("tests/system/src/lib.rs")));
        assert!(root.join("tests/system/tests/engine/line.rs").exists());
        assert!(!system.contains(&root.join("tests/system/tests/engine/line.rs")));
    }
}
