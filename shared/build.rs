//! Writes each Lua script without its comment lines to `$OUT_DIR/lua/`,
//! which `src/script.rs` includes (src/lua_strip.rs says why).

use std::path::PathBuf;
use std::{env, fs};

#[path = "src/lua_strip.rs"]
mod lua_strip;

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("lua");
    fs::create_dir_all(&out).expect("create $OUT_DIR/lua");
    println!("cargo:rerun-if-changed=lua");
    println!("cargo:rerun-if-changed=src/lua_strip.rs");
    let mut names: Vec<_> = fs::read_dir("lua")
        .expect("read shared/lua")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .collect();
    names.sort();
    for path in names {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = fs::read_to_string(&path).expect("read a script");
        let name = path.file_name().expect("file name");
        fs::write(out.join(name), lua_strip::strip_comment_lines(&text)).expect("write a script");
    }
}
