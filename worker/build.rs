//! Checks and writes the waiting-room page (`src/template.rs` says what is
//! checked): the template is `assets/waiting-room.html`, or the shop's own
//! file named by `QUEUEGATE_PAGE_TEMPLATE` (absolute, or relative to the
//! repository), shipped without its script's comment lines; the
//! translations are `assets/i18n/*.json`. The page's files go to
//! `$OUT_DIR/assets/page/` (`waiting-room.html`, and `<lang>.txt` per
//! language: its `<noscript>` HTML on the first line, its texts as JSON
//! after), which `examples/assets.rs` copies into the worker's static
//! assets; the wasm keeps only `$OUT_DIR/i18n.rs` (the text keys and the
//! language codes). A check that fails stops the build with the reason.

use std::path::{Path, PathBuf};
use std::{env, fs};

#[path = "src/template.rs"]
mod template;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-env-changed=QUEUEGATE_PAGE_TEMPLATE");
    println!("cargo:rerun-if-changed=src/template.rs");
    let src = match env::var("QUEUEGATE_PAGE_TEMPLATE") {
        Ok(p) if !p.trim().is_empty() => {
            let p = Path::new(p.trim());
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                manifest.join("..").join(p)
            }
        }
        _ => manifest.join("assets/waiting-room.html"),
    };
    println!("cargo:rerun-if-changed={}", src.display());
    let text = fs::read_to_string(&src).unwrap_or_else(|e| {
        fail(&format!(
            "cannot read the page template {}: {e}",
            src.display()
        ))
    });
    let texts = template::check_template(&text)
        .unwrap_or_else(|why| fail(&format!("page template {}: {why}", src.display())));
    let page = out.join("assets/page");
    if page.exists() {
        fs::remove_dir_all(&page).expect("clear $OUT_DIR/assets/page");
    }
    fs::create_dir_all(&page).expect("create $OUT_DIR/assets/page");
    fs::write(
        page.join("waiting-room.html"),
        template::strip_script_comments(&text),
    )
    .expect("write the page");

    let dir = manifest.join("assets/i18n");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("read assets/i18n")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut langs = vec![(
        "en".to_string(),
        "{}".to_string(),
        template::escape_html(template::NOSCRIPT_EN),
    )];
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let lang = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        // `de`, or a language and its script (`zh-Hant`).
        let (primary, script) = lang.split_once('-').unwrap_or((&lang, ""));
        let script_ok = script.is_empty()
            || (script.len() == 4
                && script.starts_with(|c: char| c.is_ascii_uppercase())
                && script[1..].bytes().all(|b| b.is_ascii_lowercase()));
        if primary.len() != 2 || !primary.bytes().all(|b| b.is_ascii_lowercase()) || !script_ok {
            fail(&format!(
                "{}: name a translation by its two-letter language code, with its script if needed (de, zh-Hant)",
                path.display()
            ));
        }
        let json = fs::read_to_string(&path).expect("read a translation");
        let (texts_json, noscript) = template::check_translation(&lang, &json, &texts)
            .unwrap_or_else(|why| fail(&format!("{}: {why}", path.display())));
        langs.push((lang, texts_json, noscript));
    }
    let mut code = String::from(
        "/// The texts of the page's `T` object.\npub const TEXT_KEYS: &[&str] = &[\n",
    );
    for (key, _) in &texts {
        code.push_str(&format!("    {key:?},\n"));
    }
    code.push_str("];\n\n/// The page's languages, English (the fallback) first; each one's texts are the asset `page/<code>.txt`.\npub const CODES: &[&str] = &[");
    for (lang, json, noscript) in &langs {
        code.push_str(&format!("{lang:?}, "));
        if noscript.contains('\n') {
            fail(&format!("{lang}: the noscript text must be one line"));
        }
        fs::write(
            page.join(format!("{lang}.txt")),
            format!("{noscript}\n{json}"),
        )
        .expect("write a language");
    }
    code.push_str("];\n");
    fs::write(out.join("i18n.rs"), code).expect("write i18n.rs");
}

fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(1)
}
