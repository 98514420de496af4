//! The scheduler binary as an operator runs it: its command line, config
//! reload, Redis Cluster and TLS, the idle room and the exported metrics.
//! Its fault tests, which want the machine to themselves, are in `rates`.

mod cli;
mod cluster;
mod failover;
mod idle;
mod liveness;
mod observability;
mod reload;
mod tls;
