//! Small text helpers shared by several modules.

/// `` `a`, `b`, `c` `` for messages.
pub fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Cuts `text` to at most `max_chars` characters, keeping the head and the
/// tail, with a marker saying how much was cut. Returns the text and whether
/// it was truncated.
pub fn truncate_middle(text: &str, max_chars: usize) -> (String, bool) {
    let total = text.chars().count();
    if total <= max_chars {
        return (text.to_owned(), false);
    }
    let head_len = max_chars * 2 / 3;
    let tail_len = max_chars - head_len;
    let head: String = text.chars().take(head_len).collect();
    let tail: String = text.chars().skip(total - tail_len).collect();
    let cut = total - head_len - tail_len;
    (
        format!("{head}\n[... truncated {cut} of {total} characters ...]\n{tail}"),
        true,
    )
}

/// The last `max_bytes` bytes of `text` (on a char boundary).
pub fn tail(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut start = text.len() - max_bytes;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Levenshtein distance (in characters), for "did you mean" hints.
pub fn edit_distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

/// Lowercase hexadecimal of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

/// The candidate closest to `found`, if it is close enough to be a typo.
pub fn closest<'a>(found: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(found, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= 2.max(candidate.len() / 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_head_and_tail_and_says_how_much() {
        let text = "a".repeat(100) + &"z".repeat(100);
        let (out, cut) = truncate_middle(&text, 30);
        assert!(cut);
        assert!(out.starts_with("aaaa"));
        assert!(out.ends_with("zzzz"));
        assert!(out.contains("truncated 170 of 200 characters"));
        assert_eq!(truncate_middle("short", 30), ("short".to_owned(), false));
    }

    #[test]
    fn closest_suggests_typos_only() {
        let fields = ["prompt", "system", "checks"];
        assert_eq!(closest("promt", fields), Some("prompt"));
        assert_eq!(closest("chekcs", fields), Some("checks"));
        assert_eq!(closest("zzzzzzzz", fields), None);
    }

    #[test]
    fn tail_respects_char_boundaries() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(tail("abc", 10), "abc");
    }
}
