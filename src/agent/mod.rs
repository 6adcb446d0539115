//! L3 agent: one task's loop (SPEC §3). No output files, no git.
