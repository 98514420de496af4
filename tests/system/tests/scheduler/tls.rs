//! `rediss://`: the scheduler admits over TLS (rustls, ring provider) to a
//! redis-server whose certificate comes from a private CA named in
//! `[redis] ca_file`, and refuses a server it cannot verify.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use queuegate_shared::ops::EnterReply;
use queuegate_shared::{Prefix, QueueId, QueueKeys, Settings};
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::scheduler::{self, Scheduler};
use queuegate_testkit::{free_port, wait_until, RedisServer};

/// A CA and a server certificate for 127.0.0.1 (EC P-256, one day).
fn make_certs(dir: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let ca = [
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=qg test CA",
    ];
    run(&[&["req", "-x509"][..], &ec, &ca].concat());
    run(&[
        &["req"][..],
        &ec,
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write server.ext");
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        "server.pem",
        "-extfile",
        "server.ext",
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_admits_over_tls_with_a_private_ca() {
    let certs = tempfile::tempdir().expect("temp dir");
    make_certs(certs.path());
    let path = |f: &str| certs.path().join(f).to_string_lossy().into_owned();
    let tls_port = free_port().to_string();
    let redis = RedisServer::builder()
        .arg("--tls-port")
        .arg(&tls_port)
        .arg("--tls-cert-file")
        .arg(&path("server.pem"))
        .arg("--tls-key-file")
        .arg(&path("server.key"))
        .arg("--tls-ca-cert-file")
        .arg(&path("ca.pem"))
        .arg("--tls-auth-clients")
        .arg("no")
        .start();
    let url = format!("rediss://127.0.0.1:{tls_port}");

    let sched = Scheduler::builder(&url)
        .redis_option("ca_file", &format!("{:?}", path("ca.pem")))
        .queue("tls", &[("admit_rate_per_second", "100")])
        .start();
    // The test itself talks plain TCP to the same server.
    let q = TestQueue {
        keys: QueueKeys::new(&Prefix::default(), &QueueId::new("tls").expect("id")),
        settings: Settings::default(),
        conn: redis::Client::open(redis.url())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect"),
    };
    for i in 0..20 {
        assert!(matches!(q.enter(&user(i)).await, EnterReply::Entered(_)));
    }
    let all_in = tokio::task::block_in_place(|| {
        let rt = tokio::runtime::Handle::current();
        wait_until(Duration::from_secs(5), || {
            rt.block_on(q.stat("admitted")) == 20
        })
    });
    assert!(all_in, "{}", sched.log());

    // The operator commands use the same TLS settings.
    let out = scheduler::command(sched.config_path(), &["status", "tls"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Without the CA the server's certificate is not trusted: exit 1.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("untrusted.toml");
    std::fs::write(
        &config,
        format!("[redis]\nurl = {url:?}\n[[queue]]\nid = \"tls\"\n"),
    )
    .expect("write config");
    let out = scheduler::command(&config, &["status"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
