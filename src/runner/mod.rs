//! L4 runner: one run of many tasks: discovery, scheduling, checks, git,
//! outputs.
