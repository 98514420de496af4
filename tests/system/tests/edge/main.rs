//! The edge worker under workerd, in front of redis-server, the gateway and
//! a test origin: the visitor's path, the page, the contract in
//! docs/openapi.yaml, health, Redis refusing, streaming bodies and lost
//! outcomes.

mod end_to_end;
mod forwarding;
mod lost_outcomes;
mod navigation;
mod openapi;
mod page_language;
mod probes;
mod queue_binding;
mod refusals;
mod streaming;
mod visit;
mod worker_health;
