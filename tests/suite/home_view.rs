//! The home directory by allow-list (docs/sandbox.md, "The home";
//! docs/security.md S1): confined programs see an empty home with the
//! toolchain directories, the `PATH` entries under it and the operator's
//! list bound back; a blocked directory is never given up for a `PATH`
//! entry beneath it; relocated XDG directories, other homes and a
//! self-hosted runner's install directory are hidden; the git identity
//! comes without the credentials.

use std::path::{Path, PathBuf};

use crate::support::cassette::answer;
use crate::support::{Run, Ybs};

/// The output of the check named `name`.
fn check_output(run: &Run, name: &str) -> String {
    run.events("t")
        .iter()
        .find(|e| e["type"] == "check.completed" && e["name"] == name)
        .map(|e| e["output_tail"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no check {name}: {}{}", run.stdout, run.stderr))
}

/// Names this run invents (not a fixed list): xorshift from the clock and
/// the process id.
struct Names(u64);

impl Names {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        Self(
            u64::try_from(nanos % u128::from(u64::MAX)).unwrap() ^ u64::from(std::process::id())
                | 1,
        )
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A file or directory name: dotted or not, 3 to 10 characters.
    fn name(&mut self) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_-";
        let length = 3 + usize::try_from(self.next() % 8).unwrap();
        let mut name: String = (0..length)
            .map(|_| char::from(CHARS[usize::try_from(self.next() % 38).unwrap()]))
            .collect();
        if self.next().is_multiple_of(2) {
            name.insert(0, '.');
        }
        name
    }
}

/// A directory outside `/tmp` (which is private in the sandbox anyway),
/// so that hiding it is what the test sees.
fn outside_tmp(ybs: &Ybs, name: &str) -> PathBuf {
    let dir = ybs.bin_dir().with_extension(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A fake home full of invented dotfiles and directories, each holding a
/// canary; listed and read from inside the sandbox, only the toolchain
/// directories (and the `PATH` entry under it) show, and no canary.
#[test]
fn confined_programs_see_only_the_allow_listed_part_of_the_home() {
    let ybs = Ybs::new();
    let home = ybs.home().canonicalize().unwrap();
    let mut names = Names::new();
    let mut canaries = Vec::new();
    for index in 0..40 {
        let canary = format!("canary-{:x}", names.next());
        let mut path = home.join(names.name());
        if index % 3 == 0 {
            path = path.join(names.name());
        }
        if index % 4 == 0 {
            path = path.join("credentials.json");
        }
        write(&path, &format!("token={canary}\n"));
        canaries.push(canary);
    }
    // Well-known ones the block-list missed, each with its canary.
    for known in [
        ".dockercfg",
        ".yarnrc",
        ".cache/huggingface/token",
        ".bash_history",
        ".python_history",
        ".mozilla/firefox/x.default/logins.json",
        ".minikube/profiles/minikube/client.key",
        ".databrickscfg",
        ".oci/config",
        ".config/gh/hosts.yml",
        ".config/gcloud/application_default_credentials.json",
        ".local/share/secrets.db",
    ] {
        let canary = format!("canary-{:x}", names.next());
        write(&home.join(known), &format!("token={canary}\n"));
        canaries.push(canary);
    }
    // The toolchains, with what a check reads from them.
    write(&home.join(".cargo/config.toml"), "# cargo-visible\n");
    write(&home.join(".cache/pip/http/x"), "pip-visible\n");
    write(&home.join(".local/bin/tool"), "local-bin-visible\n");
    // A `PATH` entry inside the blocked `~/.config` (GitHub's runners put
    // composer's there): the entry shows, nothing else of `~/.config`.
    write(
        &home.join(".config/composer/vendor/bin/phpx"),
        "composer-bin-visible\n",
    );
    write(
        &home.join(".config/composer/auth.json"),
        "{\"github-oauth\": \"canary-composer\"}\n",
    );
    canaries.push("canary-composer".to_owned());
    let path = format!(
        "{}:{}:/usr/local/bin:/usr/bin:/bin",
        home.join(".config/composer/vendor/bin").display(),
        home.join(".local/bin").display()
    );
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: home\n    run: |\n      cd \"$HOME\" && find . -mindepth 1 | sort | sed 's/^/seen: /'\n      find . -type f -exec cat {} + 2>&1\n      cat .config/composer/vendor/bin/phpx .config/composer/auth.json .config/gh/hosts.yml 2>&1\n      ls -a .config 2>&1 | sed 's/^/config: /'\n      echo written > new-file && cat new-file\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let ybs = ybs.env("PATH", &path);
    let run = ybs.run(["run", "t.yaml", "--cassette", "t.cassette.json"]);
    let output = check_output(&run, "home");
    run.expect_code(0);
    for canary in &canaries {
        assert!(
            !output.contains(canary.as_str()),
            "{canary} read:\n{output}"
        );
    }
    let allowed = [
        "./.cargo",
        "./.cache",
        "./.local",
        "./.local/bin",
        "./.config",
        "./.config/composer",
        "./.config/composer/vendor",
    ];
    for seen in output
        .lines()
        .filter_map(|line| line.strip_prefix("seen: "))
    {
        assert!(
            allowed.contains(&seen)
                || seen.starts_with("./.cargo/")
                || seen.starts_with("./.cache/pip")
                || seen.starts_with("./.local/bin/")
                || seen.starts_with("./.config/composer/vendor/bin")
                || seen == "./.gitconfig",
            "{seen} is visible:\n{output}"
        );
    }
    for visible in [
        "cargo-visible",
        "pip-visible",
        "local-bin-visible",
        "composer-bin-visible",
    ] {
        assert!(output.contains(visible), "{visible}:\n{output}");
    }
    assert!(output.contains("config: composer"), "{output}");
    assert!(!output.contains("config: gh"), "{output}");
    // The home is the task's own: a write works and never reaches the
    // real one.
    assert!(output.contains("written"), "{output}");
    assert!(!home.join("new-file").exists());
}

/// Relocated XDG directories and a self-hosted runner's install directory
/// (found from a `RUNNER_*` variable) are hidden wherever they lie; the
/// git identity reaches the sandbox without the credential entries.
#[test]
fn relocated_xdg_dirs_a_runner_install_and_git_credentials_stay_hidden() {
    let ybs = Ybs::new();
    let xdg = outside_tmp(&ybs, "xdg-config");
    write(&xdg.join("gh/hosts.yml"), "oauth_token: canary-xdg\n");
    let runner = outside_tmp(&ybs, "actions-runner");
    write(
        &runner.join(".credentials"),
        "{\"canary\": \"canary-runner\"}\n",
    );
    write(&runner.join(".runner"), "{}\n");
    std::fs::create_dir_all(runner.join("_work/_temp")).unwrap();
    let gitconfig = ybs.home().join(".gitconfig");
    write(
        &gitconfig,
        "[user]\n\tname = Check Bot\n\temail = bot@example.invalid\n[credential]\n\thelper = store --file canary-helper\n[http \"https://example.invalid/\"]\n\textraheader = AUTHORIZATION: basic canary-header\n[url \"https://canary-url@example.invalid/\"]\n\tinsteadOf = https://example.invalid/\n",
    );
    let script = format!(
        "prompt: p\ncommit: false\nchecks:\n  - name: home\n    run: |\n      ls -a '{xdg}' 2>&1 | sed 's/^/xdg: /'\n      cat '{xdg}/gh/hosts.yml' 2>&1\n      ls -a '{runner}' 2>&1 | sed 's/^/runner: /'\n      cat '{runner}/.credentials' 2>&1\n      cat \"$HOME/.gitconfig\"\n      git config --global user.name\n",
        xdg = xdg.display(),
        runner = runner.display(),
    );
    ybs.file("t.yaml", &script)
        .cassette("t.cassette.json", vec![answer("done")]);
    let ybs = ybs
        .env("XDG_CONFIG_HOME", xdg.to_str().unwrap())
        .env("RUNNER_TEMP", runner.join("_work/_temp").to_str().unwrap())
        .env("GIT_CONFIG_GLOBAL", gitconfig.to_str().unwrap());
    let run = ybs.run(["run", "t.yaml", "--cassette", "t.cassette.json"]);
    let output = check_output(&run, "home");
    run.expect_code(0);
    for canary in [
        "canary-xdg",
        "canary-runner",
        "canary-helper",
        "canary-header",
        "canary-url",
    ] {
        assert!(!output.contains(canary), "{canary} read:\n{output}");
    }
    assert!(!output.contains("xdg: gh"), "{output}");
    assert!(!output.contains("runner: .credentials"), "{output}");
    assert!(
        output.contains("email = \"bot@example.invalid\""),
        "{output}"
    );
    assert!(output.contains("\nCheck Bot\n"), "{output}");
}

/// The operator's `safety.sandbox_home_visible` adds to the allow-list;
/// the repository's config cannot.
#[test]
fn the_operator_adds_home_paths_and_the_repository_cannot() {
    let ybs = Ybs::new();
    write(&ybs.home().join(".tool/data.txt"), "operator-visible\n");
    let config = ybs.home().join("operator.json");
    write(
        &config,
        "{\"safety\": {\"sandbox_home_visible\": [\"~/.tool\"]}}",
    );
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: home\n    run: cat \"$HOME/.tool/data.txt\" 2>&1\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--cassette",
        "t.cassette.json",
        "--config",
        config.to_str().unwrap(),
    ]);
    run.expect_code(0);
    assert!(check_output(&run, "home").contains("operator-visible"));
    let without = ybs.run(["run", "t.yaml", "--cassette", "t.cassette.json"]);
    assert!(!check_output(&without, "home").contains("operator-visible"));
    ybs.file(
        ".ybs.json",
        "{\"safety\": {\"sandbox_home_visible\": [\"~/.tool\"]}}",
    );
    let repository = ybs.run(["validate", "t.yaml"]);
    assert_eq!(
        repository.code, 2,
        "{}{}",
        repository.stdout, repository.stderr
    );
    assert!(
        repository.stderr.contains("sandbox_home_visible"),
        "{}",
        repository.stderr
    );
}

/// A `PATH` entry inside a blocked directory (composer's, inside
/// `~/.config`, on GitHub's Ubuntu runners) does not un-hide the blocked
/// directory, even with the whole home shown by the operator: the entry
/// is bound back, read-only, on top of the hidden `~/.config`.
#[test]
fn a_path_entry_never_un_hides_the_blocked_directory_holding_it() {
    let ybs = Ybs::new();
    let home = ybs.home().canonicalize().unwrap();
    write(
        &home.join(".config/composer/vendor/bin/phpx"),
        "composer-bin-visible\n",
    );
    write(
        &home.join(".config/gh/hosts.yml"),
        "oauth_token: canary-gh\n",
    );
    write(
        &home.join(".config/git/credentials"),
        "https://x:canary-git@example.invalid\n",
    );
    write(&home.join("notes.txt"), "notes-visible\n");
    let config = home.join("operator.json");
    write(&config, "{\"safety\": {\"sandbox_home_visible\": [\"~\"]}}");
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        home.join(".config/composer/vendor/bin").display()
    );
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: home\n    run: |\n      cat ~/notes.txt ~/.config/composer/vendor/bin/phpx ~/.config/gh/hosts.yml ~/.config/git/credentials 2>&1\n      ls -a ~/.config 2>&1 | sed 's/^/config: /'\n      echo x > ~/.config/composer/vendor/bin/phpx 2>&1 || echo read-only\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let ybs = ybs.env("PATH", &path);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--cassette",
        "t.cassette.json",
        "--config",
        config.to_str().unwrap(),
    ]);
    let output = check_output(&run, "home");
    run.expect_code(0);
    assert!(output.contains("notes-visible"), "{output}");
    assert!(output.contains("composer-bin-visible"), "{output}");
    assert!(output.contains("read-only"), "{output}");
    assert!(!output.contains("canary-gh"), "{output}");
    assert!(!output.contains("canary-git"), "{output}");
    assert!(!output.contains("config: gh"), "{output}");
    assert_eq!(
        std::fs::read_to_string(home.join(".config/composer/vendor/bin/phpx")).unwrap(),
        "composer-bin-visible\n"
    );
}
