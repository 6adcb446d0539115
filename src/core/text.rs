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

/// Levenshtein distance in characters, for "did you mean" hints
/// (`strsim`, already built for clap's own suggestions).
pub fn edit_distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

/// Lowercase hex of `bytes` (digests, MACs, trace ids).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// The bytes spelled by `text`, two hex digits (either case) per byte;
/// `None` for an odd length or anything that is not a hex digit.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |byte: u8| char::from(byte).to_digit(16);
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| {
            let value = digit(pair[0])? * 16 + digit(pair[1])?;
            u8::try_from(value).ok()
        })
        .collect()
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

/// A duration for people: `0.4s`, `12.3s`, `4m 05s`, `1h 02m`.
pub fn human_ms(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{}.{}s", secs, ms % 1000 / 100)
    } else if secs < 3600 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h {:02}m", secs / 3600, secs % 3600 / 60)
    }
}

/// `1 iteration`, `2 iterations`, `0 errors`: a count and its noun,
/// plural unless the count is one.
pub fn count_of(count: impl Into<u64>, noun: &str) -> String {
    let count = count.into();
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_round_trips_and_unhex_takes_hex_digits_only() {
        let bytes = [0x00, 0x7f, 0x80, 0xff, 0x5b];
        assert_eq!(super::hex(&bytes), "007f80ff5b");
        assert_eq!(super::unhex("007F80ff5b").as_deref(), Some(&bytes[..]));
        assert_eq!(super::unhex(""), Some(Vec::new()));
        for bad in ["0", "+a", "0g", "-1", " 1", "é1"] {
            assert_eq!(super::unhex(bad), None, "{bad}");
        }
    }

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(super::edit_distance("kitten", "sitting"), 3);
        assert_eq!(super::edit_distance("café", "cafe"), 1);
        assert_eq!(super::edit_distance("", "abc"), 3);
    }

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
