//! L2 git: libgit2 only. Dirty check, commit of the task's files with
//! trailers, salvage refs (SPEC §8, SECURITY S12).
