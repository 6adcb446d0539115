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

/// `--shard`: a fixed `K/N`, or `auto` (`auto/N`): the index and total
/// from the CI engine the run is in ([`from_engines`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardArg {
    Fixed(Shard),
    /// `auto`, or `auto/N` (the total, for an engine that gives only an
    /// index: a Kubernetes Indexed Job).
    Auto {
        total: Option<u32>,
    },
}

impl FromStr for ShardArg {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text == "auto" {
            return Ok(Self::Auto { total: None });
        }
        if let Some(total) = text.strip_prefix("auto/") {
            return match total.trim().parse::<u32>() {
                Ok(total) if total >= 1 => Ok(Self::Auto { total: Some(total) }),
                _ => Err(format!(
                    "expected `auto/N` with N at least 1 (the number of shards), e.g. `auto/8`; got `{text}`"
                )),
            };
        }
        text.parse::<Shard>().map(Self::Fixed).map_err(|error| {
            format!("{error}; or `auto` to take the shard from the CI engine's variables")
        })
    }
}

/// Where `--shard auto` found its shard: the engine and the variables
/// read, as they were.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShardSource {
    pub engine: String,
    pub variables: std::collections::BTreeMap<String, String>,
}

impl fmt::Display for ShardSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variables: Vec<String> = self
            .variables
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        write!(f, "{}: {}", self.engine, variables.join(", "))
    }
}

/// What a task's manifest says of the run's shard: `K/N`, and, for
/// `--shard auto`, the engine and the variables read; for `--shard-by
/// durations`, the durations file's digest.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ShardRecord {
    /// `K/N`.
    pub shard: String,
    /// The CI engine `--shard auto` read it from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The engine's variables, as they were.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub variables: std::collections::BTreeMap<String, String>,
    /// `--shard-by durations`: the digest (`sha256:HEX`) of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durations: Option<String>,
}

impl ShardRecord {
    /// The record of `shard` found by `source` and split by `durations`.
    pub fn of(shard: Shard, source: Option<&ShardSource>, durations: Option<&str>) -> Self {
        Self {
            shard: shard.to_string(),
            engine: source.map(|source| source.engine.clone()),
            variables: source
                .map(|source| source.variables.clone())
                .unwrap_or_default(),
            durations: durations.map(str::to_owned),
        }
    }
}

/// One engine's variables: its name, the index variable and whether it
/// counts from 0, and the total variable (none: from `auto/N`).
struct EngineVars {
    engine: &'static str,
    index: &'static str,
    from_zero: bool,
    total: Option<&'static str>,
}

/// The engines `--shard auto` knows, in the order they are reported.
const ENGINES: &[EngineVars] = &[
    EngineVars {
        engine: "GitLab CI",
        index: "CI_NODE_INDEX",
        from_zero: false,
        total: Some("CI_NODE_TOTAL"),
    },
    EngineVars {
        engine: "CircleCI",
        index: "CIRCLE_NODE_INDEX",
        from_zero: true,
        total: Some("CIRCLE_NODE_TOTAL"),
    },
    EngineVars {
        engine: "Buildkite",
        index: "BUILDKITE_PARALLEL_JOB",
        from_zero: true,
        total: Some("BUILDKITE_PARALLEL_JOB_COUNT"),
    },
    EngineVars {
        engine: "a Kubernetes Indexed Job",
        index: "JOB_COMPLETION_INDEX",
        from_zero: true,
        total: None,
    },
    EngineVars {
        engine: "ybs",
        index: "YBS_SHARD_INDEX",
        from_zero: true,
        total: Some("YBS_SHARD_TOTAL"),
    },
];

/// Why `--shard auto` found no shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutoError {
    #[error("--shard auto found no CI engine's shard variables ({0})")]
    Nothing(String),
    #[error("--shard auto: {0}")]
    Bad(String),
    #[error("--shard auto: the engines' variables disagree: {0}")]
    Disagree(String),
}

/// The variables every engine is looked up by, for the messages.
fn known_variables() -> String {
    ENGINES
        .iter()
        .map(|vars| match vars.total {
            Some(total) => format!("{}/{total}", vars.index),
            None => format!("{} with auto/N", vars.index),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--shard auto`: the shard from the engine whose variables are set
/// (`env` reads one), with `total` from `auto/N`. GitLab's non-parallel
/// job (`CI_NODE_TOTAL=1`, no index) is 1/1; the others count from 0.
/// No engine, a bad value, or two engines that disagree is an error that
/// names what was found.
pub fn from_engines(
    env: &dyn Fn(&str) -> Option<String>,
    total: Option<u32>,
) -> Result<(Shard, ShardSource), AutoError> {
    let mut found: Vec<(Shard, ShardSource)> = Vec::new();
    for vars in ENGINES {
        let index = env(vars.index).filter(|value| !value.trim().is_empty());
        let own_total = vars
            .total
            .and_then(|name| env(name).filter(|value| !value.trim().is_empty()));
        if index.is_none() && own_total.is_none() {
            continue;
        }
        let mut variables = std::collections::BTreeMap::new();
        let number = |name: &str, value: &str| {
            value
                .trim()
                .parse::<u32>()
                .map_err(|_| AutoError::Bad(format!("{name}={value} is not a whole number")))
        };
        let count = match (&own_total, vars.total) {
            (Some(value), Some(name)) => {
                variables.insert(name.to_owned(), value.clone());
                number(name, value)?
            }
            _ => total.ok_or_else(|| {
                AutoError::Bad(format!(
                    "{}={} gives no total: pass it as `--shard auto/N`",
                    vars.index,
                    index.clone().unwrap_or_default()
                ))
            })?,
        };
        let position = match &index {
            Some(value) => {
                variables.insert(vars.index.to_owned(), value.clone());
                let raw = number(vars.index, value)?;
                if vars.from_zero {
                    raw.checked_add(1)
                } else {
                    Some(raw)
                }
                .unwrap_or(0)
            }
            // GitLab sets no index on a job that is not parallel.
            None if count == 1 => 1,
            None => {
                return Err(AutoError::Bad(format!(
                    "{} is {count} but {} is not set",
                    vars.total.unwrap_or_default(),
                    vars.index
                )));
            }
        };
        let shard = Shard::new(position, count).ok_or_else(|| {
            let variables: Vec<String> =
                variables.iter().map(|(n, v)| format!("{n}={v}")).collect();
            AutoError::Bad(format!(
                "{} gives shard {position} of {count}, which does not exist",
                variables.join(", ")
            ))
        })?;
        if let Some(wanted) = total
            && wanted != count
        {
            return Err(AutoError::Bad(format!(
                "--shard auto/{wanted} but {} says {count} shards",
                vars.engine
            )));
        }
        found.push((
            shard,
            ShardSource {
                engine: vars.engine.to_owned(),
                variables,
            },
        ));
    }
    let mut found = found.into_iter();
    let Some(first) = found.next() else {
        return Err(AutoError::Nothing(format!(
            "looked for {}",
            known_variables()
        )));
    };
    let others: Vec<(Shard, ShardSource)> = found.collect();
    if others.iter().any(|(shard, _)| *shard != first.0) {
        let all: Vec<String> = std::iter::once(&first)
            .chain(&others)
            .map(|(shard, source)| format!("{source} (shard {shard})"))
            .collect();
        return Err(AutoError::Disagree(all.join("; ")));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn each_engine_gives_its_shard_counting_its_own_way() {
        let shard = |pairs: &[(&str, &str)], total| {
            from_engines(&env(pairs), total)
                .map(|(shard, source)| (shard.to_string(), source.engine))
        };
        assert_eq!(
            shard(&[("CI_NODE_INDEX", "2"), ("CI_NODE_TOTAL", "4")], None).unwrap(),
            ("2/4".to_owned(), "GitLab CI".to_owned())
        );
        assert_eq!(shard(&[("CI_NODE_TOTAL", "1")], None).unwrap().0, "1/1");
        assert_eq!(
            shard(
                &[("CIRCLE_NODE_INDEX", "0"), ("CIRCLE_NODE_TOTAL", "3")],
                None
            )
            .unwrap()
            .0,
            "1/3"
        );
        assert_eq!(
            shard(
                &[
                    ("BUILDKITE_PARALLEL_JOB", "4"),
                    ("BUILDKITE_PARALLEL_JOB_COUNT", "5")
                ],
                None
            )
            .unwrap()
            .0,
            "5/5"
        );
        assert_eq!(
            shard(&[("JOB_COMPLETION_INDEX", "7")], Some(8)).unwrap().0,
            "8/8"
        );
        assert_eq!(
            shard(&[("YBS_SHARD_INDEX", "0"), ("YBS_SHARD_TOTAL", "2")], None)
                .unwrap()
                .0,
            "1/2"
        );
    }

    #[test]
    fn nothing_bad_or_disagreeing_is_an_error_that_says_what_it_found() {
        let nothing = from_engines(&env(&[]), None).unwrap_err().to_string();
        assert!(nothing.contains("CI_NODE_INDEX/CI_NODE_TOTAL"), "{nothing}");
        assert!(
            nothing.contains("JOB_COMPLETION_INDEX with auto/N"),
            "{nothing}"
        );
        let k8s = from_engines(&env(&[("JOB_COMPLETION_INDEX", "1")]), None).unwrap_err();
        assert!(k8s.to_string().contains("auto/N"), "{k8s}");
        let out = from_engines(
            &env(&[("CIRCLE_NODE_INDEX", "3"), ("CIRCLE_NODE_TOTAL", "3")]),
            None,
        )
        .unwrap_err();
        assert!(out.to_string().contains("shard 4 of 3"), "{out}");
        let both = from_engines(
            &env(&[
                ("CI_NODE_INDEX", "1"),
                ("CI_NODE_TOTAL", "2"),
                ("YBS_SHARD_INDEX", "1"),
                ("YBS_SHARD_TOTAL", "2"),
            ]),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            both.contains("GitLab CI: CI_NODE_INDEX=1, CI_NODE_TOTAL=2 (shard 1/2)"),
            "{both}"
        );
        assert!(both.contains("(shard 2/2)"), "{both}");
        let wrong = from_engines(
            &env(&[("CI_NODE_INDEX", "x"), ("CI_NODE_TOTAL", "2")]),
            None,
        )
        .unwrap_err();
        assert!(wrong.to_string().contains("CI_NODE_INDEX=x"), "{wrong}");
        assert_eq!(
            "auto/4".parse::<ShardArg>().unwrap(),
            ShardArg::Auto { total: Some(4) }
        );
        assert!("auto/0".parse::<ShardArg>().is_err());
        assert_eq!(
            "2/3".parse::<ShardArg>().unwrap(),
            ShardArg::Fixed(Shard::new(2, 3).unwrap())
        );
    }

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
