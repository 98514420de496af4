//! Writes the waiting-room page without the comment lines of its script to
//! `$OUT_DIR/waiting-room.html`, which `src/page.rs` serves: the comments
//! are for readers of `assets/waiting-room.html`, and every byte of the page
//! is in the wasm (BENCHMARKS.md, *Worker wasm size*).

use std::path::PathBuf;
use std::{env, fs};

fn main() {
    let src = "assets/waiting-room.html";
    println!("cargo:rerun-if-changed={src}");
    let text = fs::read_to_string(src).expect("read the page");
    let mut out = String::with_capacity(text.len());
    let mut in_script = false;
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("<script") && !code.contains("</script>") {
            in_script = true;
        } else if code.starts_with("</script>") {
            in_script = false;
        }
        if in_script && code.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    let dest = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("waiting-room.html");
    fs::write(dest, out).expect("write the page");
}
