//! Safe path resolution for the file tools (SECURITY S2).
