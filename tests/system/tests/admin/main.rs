//! The operator's actions on the real stack: the scheduler's admin API and
//! its contract, settings at run time, revoking visitors, bypass links and
//! the notice to the line.

mod api;
mod bypass;
mod notice;
mod openapi;
mod revoke;
mod runtime_settings;
