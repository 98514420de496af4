//! `queuegate-scheduler`: see the crate docs.

fn main() {
    eprintln!("queuegate-scheduler: the service arrives with the scheduler issue");
    std::process::exit(2);
}
