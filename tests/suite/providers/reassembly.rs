//! reassembly
