//! Token counts for estimates of a request's size (docs/local-models.md).
//!
//! Without the `tokenizer` cargo feature (the default build) a text is
//! bytes / 4 tokens. With it, text is counted with the o200k BPE table of
//! OpenAI's current models, embedded in the binary and parsed on the first
//! count, never before (`ybs --version` does not pay for it); it is off by
//! default for its cost in memory and start-up (docs/local-models.md).
//! Other models (Anthropic's, the Llama and Qwen families served locally)
//! use other tokenizers: for them either count is an estimate, which the
//! agent corrects with the server's own count of the previous request
//! when it has one.

/// What counted: `o200k` or `bytes/4`.
pub const METHOD: &str = if cfg!(feature = "tokenizer") {
    "o200k"
} else {
    "bytes/4"
};

/// Tokens a chat template adds around each message (role markers, turn
/// separators): the figure OpenAI documents for its own models.
pub const PER_MESSAGE: u64 = 4;

/// The tokens of `text`.
#[cfg(feature = "tokenizer")]
pub fn count(text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    let tokens = tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len();
    u64::try_from(tokens).unwrap_or(u64::MAX)
}

/// The tokens of `text`: bytes / 4, rounded up.
#[cfg(not(feature = "tokenizer"))]
pub fn count(text: &str) -> u64 {
    u64::try_from(text.len().div_ceil(4)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_about_right() {
        assert_eq!(count(""), 0);
        let english = "The quick brown fox jumps over the lazy dog. ".repeat(20);
        let tokens = count(&english);
        // About 10 tokens a sentence, whichever way it is counted.
        assert!((150..=300).contains(&tokens), "{tokens}");
        if cfg!(not(feature = "tokenizer")) {
            assert_eq!(METHOD, "bytes/4");
            assert_eq!(count("hello world"), 3);
        }
        if cfg!(feature = "tokenizer") {
            assert_eq!(METHOD, "o200k");
            assert_eq!(count("hello world"), 2);
        }
    }
}
