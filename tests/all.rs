//! One integration-test binary (STYLE practice 11): every suite drives the
//! real `ybs` binary against real files, processes and servers.

mod support;
mod suite;
