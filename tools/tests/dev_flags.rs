//! `queuegate-dev`'s flags as a newcomer types them: every combination the
//! scheduler would refuse is refused before anything starts, in one line
//! naming the flag and with exit code 2, never a panic and a backtrace
//! (issue #23). The adapted case (`--admit-rate 0.05`) starts the whole room
//! and is checked by hand in the closing note; its settings are unit-tested
//! in the binary.

use std::process::Command;

fn dev(flags: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_queuegate-dev"))
        .args(flags)
        // Even with backtraces asked for, a refused flag is one line.
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run queuegate-dev")
}

#[test]
fn refused_flags_are_one_line_naming_the_flag() {
    for (flags, starts) in [
        (&["--admit-rate", "0"][..], "queuegate-dev: --admit-rate 0:"),
        (&["--max-active", "0"][..], "queuegate-dev: --max-active 0:"),
        (
            &["--challenge-difficulty", "5"][..],
            "queuegate-dev: --challenge-difficulty 5:",
        ),
        (
            &["--max-waiting", "0"][..],
            "queuegate-dev: --max-waiting 0:",
        ),
        (
            &["--challenge-crowd", "0"][..],
            "queuegate-dev: --challenge-crowd 0:",
        ),
        (
            &["--leave-share", "2"][..],
            "queuegate-dev: --leave-share 2:",
        ),
        (
            &["--origin-error-rate", "3"][..],
            "queuegate-dev: --origin-error-rate",
        ),
    ] {
        let out = dev(flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{flags:?}: {stderr}");
        assert!(stderr.starts_with(starts), "{flags:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{flags:?}: {stderr}"
        );
        assert!(
            !stderr.contains("starting redis-server"),
            "{flags:?} started the room: {stderr}"
        );
    }
}

#[test]
fn a_port_in_use_is_refused_before_anything_starts() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = taken.local_addr().expect("its address").port().to_string();
    let out = dev(&["--port", &port]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("queuegate-dev: --port {port}: already in use")),
        "{stderr}"
    );
}

/// Each tool's `--help` opens with what that tool does, not the package's
/// description (all five once opened with "queuegate's local demo: …",
/// `queuegate-verify`, the buyers' verifier, included).
#[test]
fn each_tool_introduces_itself() {
    for (bin, opens) in [
        (
            env!("CARGO_BIN_EXE_queuegate-dev"),
            "Runs redis-server, the gateway, the scheduler",
        ),
        (
            env!("CARGO_BIN_EXE_queuegate-edge-bench"),
            "Worker CPU per request against a plain-JS floor",
        ),
        (
            env!("CARGO_BIN_EXE_queuegate-load"),
            "Figures for the whole waiting room",
        ),
        (
            env!("CARGO_BIN_EXE_queuegate-origin-bench"),
            "Orders that reach a failing origin",
        ),
        (
            env!("CARGO_BIN_EXE_queuegate-verify"),
            "Verify a queue's draw",
        ),
    ] {
        let out = Command::new(bin)
            .arg("--help")
            .output()
            .expect("run --help");
        assert!(out.status.success(), "{bin} --help");
        let help = String::from_utf8_lossy(&out.stdout);
        let first = help.lines().next().unwrap_or_default();
        assert!(
            !first.starts_with("queuegate's local demo"),
            "{bin}: {first}"
        );
        assert!(first.starts_with(opens), "{bin}: {first}");
    }
}
