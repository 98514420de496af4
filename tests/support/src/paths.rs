//! Where the repo's built artefacts live, found relative to this crate and to
//! the running test binary (so a custom `CARGO_TARGET_DIR` works).

use std::path::PathBuf;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root exists")
}

/// A binary of the workspace built into the same profile folder as the
/// running executable (`target/debug/<name>`), whether that is a test in
/// `target/debug/deps/` or a tool in `target/debug/`. The test script builds
/// every binary before it runs the tests; a missing one, or one older than
/// a source it is built from ([`crate::fresh`]), is a clear panic naming
/// the command to run, not a hang or a test of yesterday's code.
pub fn target_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current executable");
    let dir = exe.parent().expect("the executable lives in a folder");
    let profile_dir = if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        dir.parent().expect("deps/ and examples/ have a parent")
    } else {
        dir
    };
    let path = profile_dir.join(name);
    crate::fresh::assert_bin_fresh(name, &path);
    path
}
