//! `--shard K/N`: which slice of a run's tasks one machine takes.
//!
//! A task belongs to shard `hash(key) mod N + 1`, where the key is
//! `file#id` and the hash is FNV-1a (64 bit) with a SplitMix64 finish:
//! fixed here, never `std`'s `DefaultHasher`, whose output may change
//! between Rust releases. Hashing, rather than dealing tasks out by their
//! position, means that adding or removing a task never moves any other
//! task to a different shard; the price is that small runs can be uneven
//! (7 tasks over 3 shards may split 4/2/1) and a shard can be empty.

use std::fmt;
use std::str::FromStr;

/// One slice of `N`: `index` in `1..=total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shard {
    index: u32,
    total: u32,
}

impl Shard {
    /// `K/N`; `None` unless `1 <= index <= total`.
    pub fn new(index: u32, total: u32) -> Option<Self> {
        (index >= 1 && index <= total).then_some(Self { index, total })
    }

    /// K, from 1.
    pub fn index(self) -> u32 {
        self.index
    }

    /// N.
    pub fn total(self) -> u32 {
        self.total
    }

    /// The shard (`1..=total`) that the task with this key belongs to.
    pub fn of_key(key: &str, total: u32) -> u32 {
        let total = u64::from(total.max(1));
        // The remainder is below `total`, itself a `u32`.
        u32::try_from(stable_hash(key) % total).unwrap_or(0) + 1
    }

    /// True if and only if the task with this key belongs to this shard.
    pub fn contains(self, key: &str) -> bool {
        Self::of_key(key, self.total) == self.index
    }
}

/// The key a task is sharded by: `file#id`, with `file` as the run
/// reports it (relative to the working directory, `/`-separated).
pub fn shard_key(file: &str, id: &str) -> String {
    format!("{file}#{id}")
}

/// FNV-1a, then SplitMix64's finalizer so that `mod N` sees well-mixed
/// low bits. Stable across platforms and releases.
fn stable_hash(key: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `K/N` with `1 <= K <= N`, e.g. `2/8`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let number = |part: &str| part.trim().parse::<u32>().ok();
        let parsed = text
            .split_once('/')
            .and_then(|(index, total)| Some((number(index)?, number(total)?)));
        match parsed {
            Some((index, total)) => Self::new(index, total).ok_or_else(|| {
                format!("shard {index} of {total} does not exist: K must be between 1 and N, e.g. `1/{}`", total.max(1))
            }),
            None => Err(format!(
                "expected K/N (this machine's shard K of N, counting from 1), e.g. `2/8`; got `{text}`"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays() {
        let shard: Shard = "2/8".parse().unwrap();
        assert_eq!((shard.index(), shard.total()), (2, 8));
        assert_eq!(shard.to_string(), "2/8");
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
        for bad in ["0/3", "4/3", "1/0", "0/0", "3", "a/b", "-1/3", "1/3/4", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert!(
            "4/3"
                .parse::<Shard>()
                .unwrap_err()
                .contains("between 1 and N")
        );
    }

    #[test]
    fn every_key_lands_in_exactly_one_shard() {
        let keys: Vec<String> = (0..200)
            .map(|n| shard_key("tasks/a.yaml", &format!("t{n}")))
            .collect();
        for total in 1..=9 {
            let shards: Vec<Shard> = (1..=total).map(|k| Shard::new(k, total).unwrap()).collect();
            for key in &keys {
                let owners = shards.iter().filter(|shard| shard.contains(key)).count();
                assert_eq!(owners, 1, "{key} in {total}");
            }
        }
    }

    #[test]
    fn stable_and_roughly_even() {
        // Fixed forever: machines running different ybs builds must agree.
        assert_eq!(stable_hash("tasks/a.yaml#alpha"), 0x66ac_8cc3_fc41_c22a);
        assert_eq!(Shard::of_key("tasks/a.yaml#alpha", 8), 3);
        let mut counts = [0_u32; 4];
        for n in 0..1000 {
            let shard = Shard::of_key(&shard_key("tasks/big.yaml", &format!("task-{n}")), 4);
            counts[usize::try_from(shard - 1).unwrap()] += 1;
        }
        assert!(
            counts.iter().all(|&c| (200..=300).contains(&c)),
            "{counts:?}"
        );
    }
}
