//! Subprocesses that always end (SECURITY S9).
