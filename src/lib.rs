//! ybs: run LLM coding agents the way CI runs tests.
//!
//! Module levels (docs/architecture.md); imports point only down, and the L2
//! modules never use each other. `tests/suite/architecture.rs` enforces it.
//!
//! - L5 [`cli`]
//! - L4 [`runner`], [`config`]
//! - L3 [`agent`], [`task`]
//! - L2 [`llm`], [`tools`], [`policy`], [`git`], [`report`]
//! - L1 [`core`]
//!
//! With `--json`, stdout carries JSONL events and nothing else. Human text
//! goes through `report::terminal::Printer`, the only writer to stdout and
//! stderr besides clap (help, usage errors) and `ybs completions`.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod cli;
pub mod config;
pub mod core;
pub mod git;
pub mod llm;
pub mod policy;
pub mod report;
pub mod runner;
pub mod task;
pub mod tools;
