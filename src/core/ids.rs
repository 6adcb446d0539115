//! Task and run identifiers.

/// True if and only if `id` is a valid task id: `[a-z0-9][a-z0-9._-]*`.
pub fn is_valid_task_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// A run id: UTC timestamp plus a short random suffix, e.g.
/// `20261122T155213Z-3f9a1c`. Sortable, safe in ref and file names.
pub fn new_run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (year, month, day, hour, minute, second) = civil_from_unix(now.as_secs());
    // Not cryptographic: only needs to differ between runs started in the same second.
    let noise = u64::from(now.subsec_nanos()) ^ (u64::from(std::process::id()) << 20);
    let suffix = noise.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z-{suffix:06x}")
}

/// Formats a Unix time in milliseconds as RFC 3339 UTC.
pub fn rfc3339(unix_ms: u64) -> String {
    let (year, month, day, hour, minute, second) = civil_from_unix(unix_ms / 1000);
    format!(
        "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{:03}Z",
        unix_ms % 1000
    )
}

/// Parses the RFC 3339 UTC times [`rfc3339`] writes
/// (`2026-11-22T00:00:00.123Z`, fraction optional) back to Unix ms.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (
        date_parts.next()?.ok()?,
        date_parts.next()?.ok()?,
        date_parts.next()?.ok()?,
    );
    let (clock, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock_parts = clock.splitn(3, ':').map(str::parse::<u64>);
    let (hour, minute, second) = (
        clock_parts.next()?.ok()?,
        clock_parts.next()?.ok()?,
        clock_parts.next()?.ok()?,
    );
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let millis: u64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    // Howard Hinnant's days-from-civil algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    Some(((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + millis)
}

/// Converts seconds since the epoch to (year, month, day, hour, minute, second), UTC.
fn civil_from_unix(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    let hour = u32::try_from(rem / 3600).unwrap_or(0);
    let minute = u32::try_from(rem % 3600 / 60).unwrap_or(0);
    let second = u32::try_from(rem % 60).unwrap_or(0);
    (year, month, day, hour, minute, second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids() {
        for ok in ["a", "rename-helper", "t1.2_x"] {
            assert!(is_valid_task_id(ok), "{ok}");
        }
        for bad in ["", "-a", "A", "a b", "a/b", "é"] {
            assert!(!is_valid_task_id(bad), "{bad}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_305_600_123), "2026-11-22T00:00:00.123Z");
        assert!(new_run_id().starts_with("20"));
        for ms in [0, 1_795_305_600_123, 951_782_400_000, 1_709_210_096_789] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms), "{ms}");
        }
        assert_eq!(parse_rfc3339("1970-01-01T00:00:01Z"), Some(1000));
        for bad in [
            "",
            "1970-01-01",
            "1970-13-01T00:00:00Z",
            "x-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
