//! What of the home directory, and of the directories like it, confined
//! programs see (docs/sandbox.md, "The home"; docs/security.md S1): an
//! allow-list. The home is an empty directory of the task's own; the
//! toolchain directories a check needs, the `PATH` entries under the home
//! and the operator's list are bound back, read-only (or writable for the
//! task only, [`TOOLCHAIN_SCRATCH`]). The blocked paths stay hidden
//! inside them as a second layer.

use std::path::{Path, PathBuf};

use crate::core::environ::Environ;

/// The toolchain directories of a home that confined programs see,
/// relative to it (the missing ones are skipped), besides
/// `~/.local/lib/python*` and [`TOOLCHAIN_CACHES`].
pub const TOOLCHAIN_DIRS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".npm",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".local/share/pnpm",
    ".nvm",
    ".pyenv",
    ".local/bin",
];

/// The toolchain caches of `~/.cache` that confined programs see (and
/// write, for the task only); the rest of `~/.cache` stays hidden.
pub const TOOLCHAIN_CACHES: &[&str] = &[
    ".cache/pip",
    ".cache/uv",
    ".cache/pypoetry",
    ".cache/go-build",
    ".cache/yarn",
    ".cache/pnpm",
    ".cache/node-gyp",
    ".cache/deno",
    ".cache/ms-playwright",
];

/// The toolchain homes and caches under the home that confined programs
/// may write to for the task only (docs/sandbox.md, "Toolchains and
/// caches"): cargo's package-cache lock and registry, rustup's temp
/// files, the package managers' caches. `CARGO_HOME` and `RUSTUP_HOME`
/// count too when set ([`scratch`]).
pub const TOOLCHAIN_SCRATCH: &[&str] = &[
    ".cargo",
    ".rustup",
    ".npm",
    "go/pkg/mod",
    ".local/share/pnpm",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
];

/// The files that mark a self-hosted GitHub Actions runner's install
/// directory (its registration and its credentials).
const RUNNER_MARKS: &[&str] = &[".runner", ".credentials", ".credentials_rsaparams"];

/// The variables whose paths may lie in a runner's install directory.
const RUNNER_VARS: &[&str] = &[
    "RUNNER_WORKSPACE",
    "RUNNER_TEMP",
    "RUNNER_TOOL_CACHE",
    "GITHUB_WORKSPACE",
];

/// The paths under `home` that confined programs see: the toolchain
/// directories and caches, `~/.local/lib/python*`, `CARGO_HOME` and
/// `RUSTUP_HOME`, and each `PATH` entry under the home (the entry alone:
/// its install prefix is visible only when it is a toolchain directory
/// already, so `~/.local/bin` does not show `~/.local`). Missing ones are
/// left for the sandbox to skip.
pub fn visible(home: &Path, environ: &Environ, path_var: &str) -> Vec<PathBuf> {
    let homes = same_place(home);
    let mut paths: Vec<PathBuf> = TOOLCHAIN_DIRS
        .iter()
        .chain(TOOLCHAIN_CACHES)
        .map(|dir| home.join(dir))
        .collect();
    if let Ok(entries) = std::fs::read_dir(home.join(".local/lib")) {
        paths.extend(
            entries
                .flatten()
                .filter(|entry| entry.file_name().to_string_lossy().starts_with("python"))
                .map(|entry| entry.path()),
        );
    }
    paths.extend(own_toolchain_homes(environ));
    paths.extend(
        path_var
            .split(':')
            .map(Path::new)
            .filter(|entry| entry.is_absolute())
            .filter(|entry| homes.iter().any(|home| entry.starts_with(home)))
            .map(Path::to_path_buf),
    );
    paths
}

/// The directories confined programs may write to for the task only:
/// [`TOOLCHAIN_SCRATCH`] and [`TOOLCHAIN_CACHES`] under the home, and
/// `CARGO_HOME` and `RUSTUP_HOME` when set.
pub fn scratch(home: Option<&Path>, environ: &Environ) -> Vec<PathBuf> {
    home.into_iter()
        .flat_map(|home| {
            TOOLCHAIN_SCRATCH
                .iter()
                .chain(TOOLCHAIN_CACHES)
                .map(|dir| home.join(dir))
        })
        .chain(own_toolchain_homes(environ))
        .collect()
}

/// `CARGO_HOME` and `RUSTUP_HOME`, when set to absolute paths.
fn own_toolchain_homes(environ: &Environ) -> impl Iterator<Item = PathBuf> + '_ {
    ["CARGO_HOME", "RUSTUP_HOME"]
        .iter()
        .filter_map(|name| environ.var_os(name))
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
}

/// The directories shown empty besides the home, the kept paths beneath
/// them bound back: every home (`/home`, `/root`), the XDG configuration,
/// data and state directories relocated outside the home, and a
/// self-hosted runner's install directory, found from the workdir's and
/// the run directory's parents, the `RUNNER_*` variables and
/// `/opt/actions-runner`.
pub fn masked(home: Option<&Path>, environ: &Environ, near: &[&Path]) -> Vec<PathBuf> {
    let homes: Vec<PathBuf> = home.map(same_place).unwrap_or_default();
    let mut masked = vec![PathBuf::from("/home"), PathBuf::from("/root")];
    masked.extend(
        ["XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"]
            .iter()
            .filter_map(|name| environ.var_os(name))
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
            .filter(|path| !homes.iter().any(|home| path.starts_with(home))),
    );
    let places = near
        .iter()
        .map(|path| path.to_path_buf())
        .chain(
            RUNNER_VARS
                .iter()
                .filter_map(|name| environ.var_os(name))
                .map(PathBuf::from),
        )
        .chain(std::iter::once(PathBuf::from(
            "/opt/actions-runner/.runner",
        )));
    for place in places.filter(|place| place.is_absolute()) {
        for dir in place.ancestors().skip(1) {
            if dir.parent().is_some()
                && RUNNER_MARKS
                    .iter()
                    .any(|mark| dir.join(mark).symlink_metadata().is_ok())
                && !masked.iter().any(|known| known == dir)
            {
                masked.push(dir.to_path_buf());
            }
        }
    }
    masked
}

/// `path` and, when a link leads elsewhere, where it leads.
fn same_place(path: &Path) -> Vec<PathBuf> {
    let mut places = vec![path.to_path_buf()];
    if let Ok(real) = path.canonicalize()
        && real != path
    {
        places.push(real);
    }
    places
}

/// The `.gitconfig` of the empty home: the identity of the host's global
/// configuration (`GIT_CONFIG_GLOBAL`, else `~/.gitconfig`, then the XDG
/// one): `user.name`, `user.email` and `init.defaultBranch`. Never its
/// credential helpers, `http.*.extraheader`, `url.*` rewrites, includes
/// or anything else. `None` when there is nothing to say.
pub fn gitconfig(home: Option<&Path>, environ: &Environ) -> Option<String> {
    let global = environ
        .var_os("GIT_CONFIG_GLOBAL")
        .map(PathBuf::from)
        .or_else(|| home.map(|home| home.join(".gitconfig")));
    let xdg = environ
        .var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| home.map(|home| home.join(".config")))
        .map(|config| config.join("git/config"));
    let files: Vec<git2::Config> = [global, xdg]
        .into_iter()
        .flatten()
        .filter(|path| path.is_file())
        .filter_map(|path| git2::Config::open(&path).ok())
        .collect();
    let value = |name: &str| {
        files
            .iter()
            .find_map(|config| config.get_string(name).ok())
            .filter(|value| !value.chars().any(char::is_control))
    };
    let mut text = String::new();
    for (section, keys) in [
        ("user", &["name", "email"][..]),
        ("init", &["defaultBranch"][..]),
    ] {
        let lines: Vec<String> = keys
            .iter()
            .filter_map(|key| {
                value(&format!("{section}.{key}")).map(|value| {
                    format!(
                        "\t{key} = \"{}\"\n",
                        value.replace('\\', "\\\\").replace('"', "\\\"")
                    )
                })
            })
            .collect();
        if !lines.is_empty() {
            text.push_str(&format!("[{section}]\n"));
            text.extend(lines);
        }
    }
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environ(pairs: &[(&str, &str)]) -> Environ {
        Environ::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn a_path_entry_under_the_home_shows_itself_and_not_its_prefix() {
        let home = Path::new("/h");
        let paths = visible(
            home,
            &environ(&[]),
            "/h/.local/bin:/h/.config/composer/vendor/bin:/usr/bin:relative",
        );
        assert!(paths.contains(&PathBuf::from("/h/.config/composer/vendor/bin")));
        assert!(paths.contains(&PathBuf::from("/h/.local/bin")));
        assert!(!paths.contains(&PathBuf::from("/h/.config/composer/vendor")));
        assert!(!paths.contains(&PathBuf::from("/h/.local")));
        assert!(!paths.contains(&PathBuf::from("/h/.config")));
        assert!(!paths.contains(&PathBuf::from("/h/.cache")));
        assert!(!paths.contains(&PathBuf::from("/usr/bin")));
        assert!(paths.contains(&PathBuf::from("/h/.cache/pip")));
    }

    #[test]
    fn relocated_xdg_directories_and_a_runner_install_are_masked() {
        let dir = tempfile::tempdir().unwrap();
        let runner = dir.path().join("actions-runner");
        let workdir = runner.join("_work/repo/repo");
        std::fs::create_dir_all(&workdir).unwrap();
        std::fs::write(runner.join(".credentials"), "{}").unwrap();
        let masked = masked(
            Some(Path::new("/h")),
            &environ(&[
                ("XDG_CONFIG_HOME", "/srv/config"),
                ("XDG_DATA_HOME", "/h/.local/share"),
            ]),
            &[&workdir],
        );
        assert!(masked.contains(&PathBuf::from("/srv/config")), "{masked:?}");
        assert!(!masked.contains(&PathBuf::from("/h/.local/share")));
        assert!(masked.contains(&runner), "{masked:?}");
        assert!(masked.contains(&PathBuf::from("/home")));
    }

    #[test]
    fn the_gitconfig_keeps_the_identity_and_drops_credentials() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(".gitconfig"),
            "[user]\n\tname = Ann Example\n\temail = a@b.c\n[credential]\n\thelper = store\n[http \"https://x\"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n[url \"https://tok@x/\"]\n\tinsteadOf = https://x/\n",
        )
        .unwrap();
        let text = gitconfig(Some(home.path()), &environ(&[])).unwrap();
        assert_eq!(
            text,
            "[user]\n\tname = \"Ann Example\"\n\temail = \"a@b.c\"\n"
        );
        assert_eq!(gitconfig(Some(Path::new("/nowhere")), &environ(&[])), None);
    }
}
