//! `redis-rest`: an Upstash-compatible REST gateway (arrives with its issue).

fn main() {
    eprintln!("redis-rest: the gateway arrives with its issue");
    std::process::exit(2);
}
