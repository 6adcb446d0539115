//! The user's toolchain in checks, with no operator config
//! (docs/sandbox.md, "Toolchains and caches"): the real `HOME`, read-only
//! with its credentials hidden, toolchain homes and caches writable for
//! the task only, and a hint naming the setting when a toolchain still
//! cannot find itself.

use std::path::{Path, PathBuf};

use crate::support::cassette::answer;
use crate::support::{Run, Ybs};

/// The output of the check named `name`.
fn check_output(run: &Run, name: &str) -> String {
    run.events("t")
        .iter()
        .find(|e| e["type"] == "check.completed" && e["name"] == name)
        .map(|e| e["output_tail"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no check {name}"))
}

/// A library crate with no dependencies and one unit test.
fn tiny_crate(ybs: &Ybs) {
    ybs.file(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .file(
        "src/lib.rs",
        "pub fn two() -> u32 {\n    2\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn two() {\n        assert_eq!(super::two(), 2);\n    }\n}\n",
    );
}

/// The home of the machine's rustup install (`~/.cargo/bin/cargo` and
/// `~/.rustup`), as a user has it; `None` (with a `SKIPPED:` line) when
/// this machine has none.
fn rustup_home() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let found = home.filter(|home| {
        home.join(".cargo/bin/cargo").is_file() && home.join(".rustup/toolchains").is_dir()
    });
    if found.is_none() {
        println!("SKIPPED: no rustup install under $HOME (~/.cargo/bin/cargo, ~/.rustup)");
    }
    found
}

/// ybs run as a user of rustup would run it: `HOME` the real one,
/// `~/.cargo/bin` first on the `PATH`, none of the variables `cargo test`
/// sets for the test binary (`RUSTUP_TOOLCHAIN`, `CARGO_HOME`…), no
/// operator config.
fn run_as_rustup_user(ybs: &Ybs, home: &Path) -> Run {
    let mut command = ybs.command();
    command.env("HOME", home).env(
        "PATH",
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            home.join(".cargo/bin").display()
        ),
    );
    for name in [
        "RUSTUP_TOOLCHAIN",
        "RUSTUP_HOME",
        "CARGO_HOME",
        "CARGO",
        "CARGO_TARGET_DIR",
        "RUSTC",
        "RUSTC_WRAPPER",
    ] {
        command.env_remove(name);
    }
    let output = command
        .args(["run", "t.yaml", "--cassette", "t.cassette.json"])
        .output()
        .unwrap();
    Run::from_output(output, ybs.path())
}

/// The first check of a Rust project: rustup's `cargo` from `~/.cargo/bin`
/// runs `cargo test --offline` in the sandbox with no operator config
/// (it failed with rustup's "no default is configured" while children got
/// an empty `HOME`).
#[test]
fn rustup_cargo_test_passes_in_a_check_with_no_operator_config() {
    let Some(home) = rustup_home() else {
        return;
    };
    let ybs = Ybs::new();
    tiny_crate(&ybs);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: tests\n    run: cargo test --offline --quiet\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let run = run_as_rustup_user(&ybs, &home);
    let output = check_output(&run, "tests");
    run.expect_code(0);
    assert!(
        output.contains("test tests::two ... ok") || output.contains("1 passed"),
        "{output}"
    );
}

/// The home is the task's own (an empty directory with the toolchains
/// bound back), their credentials hidden (`~/.cargo/credentials.toml`
/// reads empty), and what a check writes into a toolchain's home
/// (`~/.cargo/registry`) or elsewhere in the home works during the task
/// and is gone after it.
#[test]
fn the_home_is_the_tasks_own_with_credentials_hidden_and_toolchain_writes_kept_from_it() {
    let ybs = Ybs::new();
    let home = ybs.home();
    std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
    std::fs::write(
        home.join(".cargo/credentials.toml"),
        "[registry]\ntoken = \"cio-canary-7f3e\"\n",
    )
    .unwrap();
    std::fs::write(home.join(".cargo/config.toml"), "# visible-setting-5a1c\n").unwrap();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: home\n    run: |\n      echo \"home=$HOME\"\n      cat \"$HOME/.cargo/config.toml\"\n      echo index > \"$HOME/.cargo/registry/new-index\" && cat \"$HOME/.cargo/registry/new-index\"\n      touch \"$HOME/.cargo/.package-cache\" && echo locked\n      mkdir -p \"$HOME/.cache/pip/http\" && echo cached\n      cat \"$HOME/.cargo/credentials.toml\"\n      touch \"$HOME/elsewhere\" && echo home-written\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let run = ybs.run(["run", "t.yaml", "--cassette", "t.cassette.json"]);
    let output = check_output(&run, "home");
    run.expect_code(0);
    assert!(
        output.contains(&format!("home={}\n", home.display())),
        "{output}"
    );
    assert!(output.contains("visible-setting-5a1c"), "{output}");
    assert!(output.contains("index\nlocked\ncached\n"), "{output}");
    assert!(output.contains("home-written"), "{output}");
    assert!(!output.contains("cio-canary-7f3e"), "{output}");
    assert!(!run.stdout.contains("cio-canary-7f3e"));
    // Nothing the check wrote reached the real home.
    assert!(!home.join(".cargo/registry/new-index").exists());
    assert!(!home.join(".cargo/.package-cache").exists());
    assert!(!home.join("elsewhere").exists());
    assert!(!home.join(".cache/pip").exists());
}

/// A check that fails with rustup's own message says which setting helps.
#[test]
fn a_toolchain_failure_names_the_setting_that_helps() {
    let ybs = Ybs::new();
    ybs.file(
        "fake-cargo.sh",
        "echo \"error: rustup could not choose a version of cargo to run, because one wasn't specified explicitly, and no default is configured.\" >&2\nexit 1\n",
    )
    .file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: tests\n    run: sh fake-cargo.sh\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let run = ybs.run(["run", "t.yaml", "--cassette", "t.cassette.json"]);
    run.expect_code(1);
    let message = run.read("ybs-out/junit.xml");
    assert!(
        message.contains("hint: rustup found no toolchain"),
        "{message}"
    );
    assert!(message.contains("RUSTUP_TOOLCHAIN"), "{message}");
    assert!(
        run.stdout.contains("hint: rustup found no toolchain"),
        "{}",
        run.stdout
    );
}

/// The same check run by an unprivileged ybs (`nobody`, through `setpriv`)
/// whose home holds the machine's rustup install (bound there in a private
/// mount namespace: `/root` is closed to `nobody`). Needs root to set that
/// up (the tests run as root in CI).
#[test]
fn rustup_cargo_test_passes_for_an_unprivileged_user() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let Some(real_home) = rustup_home() else {
        return;
    };
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        println!("SKIPPED: becoming nobody needs root");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("ybs-nobody-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let root = dir.path();
    let (home, work, tmp) = (root.join("home"), root.join("work"), root.join("tmp"));
    for path in [
        home.join(".cargo"),
        home.join(".rustup"),
        work.join("src"),
        tmp.clone(),
    ] {
        std::fs::create_dir_all(path).unwrap();
    }
    std::fs::write(
        work.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        work.join("src/lib.rs"),
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn two() {\n        assert_eq!(1 + 1, 2);\n    }\n}\n",
    )
    .unwrap();
    std::fs::write(
        work.join("t.yaml"),
        "prompt: p\ncommit: false\nchecks:\n  - name: tests\n    run: cargo test --offline --quiet\n",
    )
    .unwrap();
    std::fs::write(
        work.join("t.cassette.json"),
        serde_json::json!({"version": 1, "interactions": [answer("done")]}).to_string(),
    )
    .unwrap();
    // A copy of the binary `nobody` can reach: the build's own may sit
    // in a directory only root may enter (a clone in a `mktemp -d`).
    let ybs = root.join("ybs");
    std::fs::copy(assert_cmd::cargo::cargo_bin("ybs"), &ybs).unwrap();
    for entry in walk(root) {
        std::os::unix::fs::chown(&entry, Some(65534), Some(65534)).unwrap();
        let mode = if entry.is_dir() || entry == ybs {
            0o755
        } else {
            0o644
        };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let script = format!(
        "mount --make-rprivate / && mount --bind '{cargo}' '{home}/.cargo' && mount --bind '{rustup}' '{home}/.rustup' && exec setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH='{home}/.cargo/bin:/usr/bin:/bin' HOME='{home}' TMPDIR='{tmp}' GIT_CONFIG_GLOBAL=/dev/null '{ybs}' run t.yaml --cassette t.cassette.json",
        tmp = tmp.display(),
        cargo = real_home.join(".cargo").display(),
        rustup = real_home.join(".rustup").display(),
        home = home.display(),
        ybs = ybs.display(),
    );
    let Ok(output) = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .current_dir(&work)
        .stdin(std::process::Stdio::null())
        .output()
    else {
        println!("SKIPPED: no unshare");
        return;
    };
    let run = Run::from_output(output, &work);
    let output = check_output(&run, "tests");
    run.expect_code(0);
    assert!(output.contains("1 passed"), "{output}");
    // The private temp dir went with the task, overlay work directories
    // (which overlayfs leaves at mode 000) included.
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `root` and everything under it.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut paths = vec![root.to_path_buf()];
    let mut index = 0;
    while index < paths.len() {
        if paths[index].is_dir() {
            let children: Vec<PathBuf> = std::fs::read_dir(&paths[index])
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .collect();
            paths.extend(children);
        }
        index += 1;
    }
    paths
}
