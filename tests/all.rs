#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is the failure report"
)]
//! One integration-test binary: every suite drives the
//! real `ybs` binary against real files, processes and servers.

mod suite;
mod support;
