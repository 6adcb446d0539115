//! keys
