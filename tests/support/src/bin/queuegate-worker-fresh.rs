//! `queuegate-worker-fresh [DIR]`: exits 0 when the worker bundle in DIR
//! (default `worker/build`) is newer than everything it is built from, 1
//! naming the file that changed (or the missing bundle) otherwise.
//! `scripts/dev` asks it before rebuilding the wasm, with the same inputs
//! the tests check ([`queuegate_testkit::fresh`]).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| queuegate_testkit::repo_root().join("worker/build"));
    match queuegate_testkit::fresh::worker_stale(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(stale) => {
            eprintln!("{}", stale.explain("scripts/build-worker"));
            ExitCode::FAILURE
        }
    }
}
