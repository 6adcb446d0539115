//! Durations as people write them: `15m`, `30s`, `2h`, `1h30m`, `500ms`,
//! or a bare whole number of seconds (`90`).

use std::time::Duration;

/// Parses a duration; `None` when the text is not one. Units are `h`, `m`,
/// `s` and `ms`, each at most once, largest first; whitespace between parts
/// is allowed (`1h 30m`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().map(Duration::from_secs);
    }
    let mut rest = text;
    let mut total = Duration::ZERO;
    // Units in the order they must appear, with their length in ms.
    let units: [(&str, u64); 4] = [("h", 3_600_000), ("ms", 1), ("m", 60_000), ("s", 1_000)];
    let mut last_rank = None;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return None;
        }
        let number: u64 = rest[..digits_end].parse().ok()?;
        rest = &rest[digits_end..];
        let (rank, unit_ms, unit_len) = units
            .iter()
            .enumerate()
            .find(|(_, (unit, _))| rest.starts_with(unit))
            .map(|(index, (unit, ms))| (rank_of(index), *ms, unit.len()))?;
        if last_rank.is_some_and(|last| rank <= last) {
            return None;
        }
        last_rank = Some(rank);
        rest = rest[unit_len..].trim_start();
        total = total.checked_add(Duration::from_millis(number.checked_mul(unit_ms)?))?;
    }
    Some(total)
}

/// Order h < m < s < ms, whatever the position in the lookup table (which
/// tries `ms` before `m` so `500ms` is not read as minutes).
fn rank_of(index: usize) -> u8 {
    match index {
        0 => 0,
        2 => 1,
        3 => 2,
        _ => 3,
    }
}

/// `1h30m`, `90s`, `500ms`: the shortest exact form, for messages.
pub fn format_duration(duration: Duration) -> String {
    let mut ms = duration.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        let cases = [
            ("15m", 900_000),
            ("30s", 30_000),
            ("2h", 7_200_000),
            ("1h30m", 5_400_000),
            ("1h 30m", 5_400_000),
            ("500ms", 500),
            ("1m30s", 90_000),
            ("2s500ms", 2_500),
            ("90", 90_000),
            ("0", 0),
        ];
        for (text, ms) in cases {
            assert_eq!(
                parse_duration(text),
                Some(Duration::from_millis(ms)),
                "{text}"
            );
        }
    }

    #[test]
    fn rejected_forms() {
        for text in [
            "", "fast", "m", "1.5h", "30m1h", "1m1m", "-5s", "10x", "1h30",
        ] {
            assert_eq!(parse_duration(text), None, "{text}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for text in ["1h30m", "90ms", "2s500ms", "15m"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }
}
