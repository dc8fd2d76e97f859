//! Fixtures for the end-to-end tests: a real relay, a real tunnel client, a
//! real local handler and an HTTP caller, all on loopback port 0. Each
//! fixture stops what it started when dropped.
#![allow(dead_code)]

pub mod bin;
pub mod caller;
pub mod handlers;
pub mod history;
pub mod link;
pub mod local;
pub mod process;
pub mod relay;
pub mod tunnel;
