//! The process's TLS cryptography: rustls with `ring`. reqwest is built
//! without a provider of its own (Cargo.toml), so every HTTP client is
//! built after [`install`], which every place that builds one calls.

use std::sync::Once;

/// Makes `ring` the process's rustls provider; the first call does it,
/// the others return at once.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // Err only when a provider is already installed: then that one is
        // used, which is what a second install would have wanted anyway.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_install_a_provider_is_there_and_a_second_install_changes_nothing() {
        install();
        let first = rustls::crypto::CryptoProvider::get_default().map(std::sync::Arc::as_ptr);
        assert!(first.is_some());
        install();
        let second = rustls::crypto::CryptoProvider::get_default().map(std::sync::Arc::as_ptr);
        assert_eq!(first, second);
    }
}
