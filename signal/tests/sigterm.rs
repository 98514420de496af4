//! SIGTERM resolves the shutdown signal instead of killing the process (a
//! test binary of its own, so the signal reaches no other test).

use std::time::Duration;

use queuegate_signal::shutdown_signal;

#[cfg(unix)]
#[tokio::test]
async fn sigterm_resolves_the_shutdown_signal() {
    let mut signal = std::pin::pin!(shutdown_signal());
    // The first poll installs the handlers; nothing has arrived yet.
    tokio::select! {
        biased;
        () = &mut signal => panic!("resolved before any signal"),
        () = std::future::ready(()) => {}
    }
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    tokio::time::timeout(Duration::from_secs(10), signal)
        .await
        .expect("SIGTERM resolves the signal");
}
