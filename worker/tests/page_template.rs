//! A shop's own page template (`QUEUEGATE_PAGE_TEMPLATE`, bundled at build
//! time): the build takes one that keeps the placeholders and the script,
//! and stops with the reason for one that does not. Runs `cargo check` of
//! the worker for wasm32 with the variable set (the build script does the
//! checking; `src/template.rs` has the unit tests).

use std::path::Path;
use std::process::Command;

fn check_with(template: &Path) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args([
            "check",
            "--quiet",
            "-p",
            "queuegate-worker",
            "--lib",
            "--target",
            "wasm32-unknown-unknown",
        ])
        .env("QUEUEGATE_PAGE_TEMPLATE", template)
        .output()
        .expect("run cargo check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_shops_template_is_checked_when_the_worker_is_built() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/waiting-room.html"),
    )
    .expect("the page");
    let dir = tempfile::tempdir().expect("tempdir");

    // The shop's markup and style around the same placeholders and script.
    let own = dir.path().join("shop.html");
    std::fs::write(
        &own,
        page.replacen(
            "<main>",
            "<main class=\"shop\"><img src=\"/logo.svg\" alt=\"Shop\">",
            1,
        ),
    )
    .expect("write");
    let (ok, stderr) = check_with(&own);
    assert!(ok, "a good template was refused:\n{stderr}");

    // One that lost a placeholder, or loads a script from elsewhere.
    for (what, broken) in [
        ("{{noscript}}", page.replacen("{{noscript}}", "", 1)),
        (
            "<script src",
            page.replacen(
                "</head>",
                "<script src=\"https://cdn.example/x.js\"></script></head>",
                1,
            ),
        ),
    ] {
        let bad = dir.path().join("bad.html");
        std::fs::write(&bad, broken).expect("write");
        let (ok, stderr) = check_with(&bad);
        assert!(!ok, "a template without {what} was built");
        assert!(
            stderr.contains("page template") && stderr.contains(what),
            "{stderr}"
        );
    }
    let (ok, stderr) = check_with(&dir.path().join("missing.html"));
    assert!(
        !ok && stderr.contains("cannot read the page template"),
        "{stderr}"
    );
}
