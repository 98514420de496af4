//! Writes the worker's static assets into a folder (`scripts/build-worker`
//! runs it after the wasm build): the page's template and languages as the
//! build checked them, and each Lua script's text exactly as its pinned
//! hash was computed (`Script::source`), for EVAL after a NOSCRIPT reply.
//!
//! `cargo run -p queuegate-worker --example assets -- DIR`

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::{env, fs, io};

fn main() -> ExitCode {
    let mut args = env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: assets DIR (the folder wrangler.toml's [assets] names)");
        return ExitCode::from(2);
    };
    match write(Path::new(&dir)) {
        Ok(count) => {
            println!("{count} assets written to {}", Path::new(&dir).display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "error: writing the assets into {}: {e}",
                Path::new(&dir).display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Replaces `dir`'s `page/` and `lua/` with this build's; returns how many
/// files were written.
fn write(dir: &Path) -> io::Result<usize> {
    let built = PathBuf::from(env!("OUT_DIR")).join("assets/page");
    let page = dir.join("page");
    let lua = dir.join("lua");
    for sub in [&page, &lua] {
        if sub.exists() {
            fs::remove_dir_all(sub)?;
        }
        fs::create_dir_all(sub)?;
    }
    let mut count = 0;
    for entry in fs::read_dir(&built)? {
        let from = entry?.path();
        if let Some(name) = from.file_name() {
            fs::copy(&from, page.join(name))?;
            count += 1;
        }
    }
    for script in queuegate_shared::script::all() {
        fs::write(lua.join(format!("{}.lua", script.name())), script.source())?;
        count += 1;
    }
    Ok(count)
}
