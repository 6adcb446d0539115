//! ybs's cache directory: tool schemas keyed by path, size and mtime, and
//! the persisted call metrics that `ybs tools list` shows.
//!
//! `$XDG_CACHE_HOME/ybs`, else `~/.cache/ybs`. Everything here is a
//! cache: unreadable or corrupt files are treated as empty and rewritten,
//! and no failure to write one ever fails a call or a task. Files are
//! replaced atomically (temp file + rename); the metrics file is updated
//! under an advisory lock so concurrent ybs processes add up.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::metrics::ToolStats;

const SCHEMAS_FILE: &str = "schemas.json";
const METRICS_FILE: &str = "metrics.json";
const METRICS_LOCK: &str = "metrics.lock";
const FORMAT_VERSION: u32 = 1;
/// Entries kept in the schema cache; the oldest checked go first.
const MAX_SCHEMAS: usize = 4096;

/// `$XDG_CACHE_HOME/ybs` (when absolute), else `HOME/.cache/ybs`.
pub fn cache_dir(xdg_cache_home: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    match xdg_cache_home.filter(|dir| dir.is_absolute()) {
        Some(dir) => Some(dir.join("ybs")),
        None => home.map(|home| home.join(".cache").join("ybs")),
    }
}

/// What identifies one version of an executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: u64,
}

impl FileStamp {
    pub fn of(metadata: &fs::Metadata) -> Self {
        let mtime_ns = metadata
            .modified()
            .ok()
            .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            });
        Self {
            size: metadata.len(),
            mtime_ns,
        }
    }
}

/// What `TOOL --schema` gave for one version of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SchemaProbe {
    /// A JSON object (parsed again on every use: it may still be invalid).
    Printed { schema: Value },
    /// No usable answer: non-zero exit, timeout, non-JSON output.
    Unknown { reason: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CachedSchema {
    stamp: FileStamp,
    probe: SchemaProbe,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct SchemaFile {
    version: u32,
    #[serde(default)]
    tools: BTreeMap<String, CachedSchema>,
}

/// Schemas from `--schema`, keyed by the executable's canonical path.
#[derive(Debug, Default)]
pub struct SchemaCache {
    file: Option<PathBuf>,
    entries: BTreeMap<String, CachedSchema>,
    dirty: bool,
}

impl SchemaCache {
    /// Reads the cache in `dir`; `None` keeps everything in memory.
    pub fn open(dir: Option<&Path>) -> Self {
        let file = dir.map(|dir| dir.join(SCHEMAS_FILE));
        let entries = file
            .as_deref()
            .and_then(|file| fs::read(file).ok())
            .and_then(|bytes| serde_json::from_slice::<SchemaFile>(&bytes).ok())
            .filter(|parsed| parsed.version == FORMAT_VERSION)
            .map(|parsed| parsed.tools)
            .unwrap_or_default();
        Self {
            file,
            entries,
            dirty: false,
        }
    }

    /// The probe for `path` if it was made on this very version.
    pub fn get(&self, path: &Path, stamp: FileStamp) -> Option<&SchemaProbe> {
        self.entries
            .get(&path.to_string_lossy().into_owned())
            .filter(|cached| cached.stamp == stamp)
            .map(|cached| &cached.probe)
    }

    pub fn put(&mut self, path: &Path, stamp: FileStamp, probe: SchemaProbe) {
        self.entries.insert(
            path.to_string_lossy().into_owned(),
            CachedSchema { stamp, probe },
        );
        self.dirty = true;
    }

    /// Writes the cache back if anything changed, dropping entries whose
    /// file is gone. Errors are returned for the caller to ignore or show.
    pub fn save(&mut self) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        if !self.dirty {
            return Ok(());
        }
        self.entries.retain(|path, _| Path::new(path).exists());
        while self.entries.len() > MAX_SCHEMAS {
            let Some(first) = self.entries.keys().next().cloned() else {
                break;
            };
            self.entries.remove(&first);
        }
        let contents = SchemaFile {
            version: FORMAT_VERSION,
            tools: std::mem::take(&mut self.entries),
        };
        let result = write_json(file, &contents);
        self.entries = contents.tools;
        self.dirty = false;
        result
    }
}

/// One tool's persisted metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersistedMetrics {
    pub name: String,
    pub path: String,
    pub stats: ToolStats,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct MetricsFile {
    version: u32,
    #[serde(default)]
    tools: Vec<PersistedMetrics>,
}

/// The persisted metrics in `dir` (empty when there are none).
pub fn load_metrics(dir: &Path) -> Vec<PersistedMetrics> {
    read_metrics(&dir.join(METRICS_FILE))
}

fn read_metrics(file: &Path) -> Vec<PersistedMetrics> {
    fs::read(file)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<MetricsFile>(&bytes).ok())
        .filter(|parsed| parsed.version == FORMAT_VERSION)
        .map(|parsed| parsed.tools)
        .unwrap_or_default()
}

/// Adds `recorded` ((name, path), stats) to the persisted metrics in
/// `dir`, under a lock shared by every ybs process.
pub fn record_metrics(dir: &Path, recorded: &[((String, String), ToolStats)]) -> io::Result<()> {
    if recorded.is_empty() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(METRICS_LOCK))?;
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, errno)| io::Error::from(errno))?;
    let file = dir.join(METRICS_FILE);
    let mut tools = read_metrics(&file);
    for ((name, path), stats) in recorded {
        match tools
            .iter_mut()
            .find(|entry| &entry.name == name && &entry.path == path)
        {
            Some(entry) => entry.stats.merge(stats),
            None => tools.push(PersistedMetrics {
                name: name.clone(),
                path: path.clone(),
                stats: stats.clone(),
            }),
        }
    }
    write_json(
        &file,
        &MetricsFile {
            version: FORMAT_VERSION,
            tools,
        },
    )
}

/// Writes `value` as JSON to `file` through a temp file and a rename.
fn write_json(file: &Path, value: &impl Serialize) -> io::Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        file.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    fs::write(&temp, bytes)?;
    fs::rename(&temp, file).inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::tools::external::metrics::Outcome;

    #[test]
    fn cache_dir_prefers_an_absolute_xdg_dir() {
        let home = Path::new("/home/u");
        assert_eq!(
            cache_dir(Some(Path::new("/x")), Some(home)),
            Some(PathBuf::from("/x/ybs"))
        );
        assert_eq!(
            cache_dir(Some(Path::new("rel")), Some(home)),
            Some(PathBuf::from("/home/u/.cache/ybs"))
        );
        assert_eq!(cache_dir(None, None), None);
    }

    #[test]
    fn schemas_round_trip_and_miss_on_a_new_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        fs::write(&tool, "x").unwrap();
        let stamp = FileStamp::of(&fs::metadata(&tool).unwrap());
        let mut cache = SchemaCache::open(Some(dir.path()));
        assert!(cache.get(&tool, stamp).is_none());
        let probe = SchemaProbe::Unknown {
            reason: "exit 1".to_owned(),
        };
        cache.put(&tool, stamp, probe.clone());
        cache.put(Path::new("/gone/tool"), stamp, probe.clone());
        cache.save().unwrap();
        let cache = SchemaCache::open(Some(dir.path()));
        assert_eq!(cache.get(&tool, stamp), Some(&probe));
        assert!(cache.get(Path::new("/gone/tool"), stamp).is_none());
        let changed = FileStamp {
            size: stamp.size + 1,
            ..stamp
        };
        assert!(cache.get(&tool, changed).is_none());
    }

    #[test]
    fn metrics_add_up_across_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut stats = ToolStats::default();
        stats.record(Outcome::Success, Duration::from_millis(4));
        let key = ("t".to_owned(), "/t".to_owned());
        record_metrics(dir.path(), &[(key.clone(), stats.clone())]).unwrap();
        record_metrics(dir.path(), &[(key, stats)]).unwrap();
        let loaded = load_metrics(dir.path());
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].stats.calls, 2);
        assert_eq!(loaded[0].stats.durations_ms, [4, 4]);
        fs::write(dir.path().join(METRICS_FILE), "garbage").unwrap();
        assert!(load_metrics(dir.path()).is_empty());
    }
}
