use super::*;
use crate::policy::shell;

fn guards() -> Guards {
    let mut settings = GuardSettings::new("/home/u/w", Some(PathBuf::from("/home/u")));
    settings.protected_paths = vec![PathBuf::from("tasks/t.yaml"), PathBuf::from("/tmp/gh/env")];
    settings.allowed_roots = vec![PathBuf::from("/opt/shared")];
    Guards::new(&settings).unwrap()
}

fn shell(command: &str) -> ShellCheck {
    guards().check_shell(&shell::parse(command), None)
}

/// (command, the guard that must fire, or "" for none)
const SHELL: &[(&str, &str)] = &[
    ("sudo id", "blocked_commands"),
    ("/usr/bin/sudo id", "blocked_commands"),
    ("cargo test && sudo id", "blocked_commands"),
    ("echo $(sudo id)", "blocked_commands"),
    ("env X=1 sudo id", "blocked_commands"),
    ("timeout 5 sudo id", "blocked_commands"),
    ("bash -c 'sudo id'", "blocked_commands"),
    ("xargs sudo id", "blocked_commands"),
    ("if true; then sudo id; fi", "blocked_commands"),
    ("rm -rf /", "blocked_commands"),
    ("rm -fr /", "blocked_commands"),
    ("rm -r -f /", "blocked_commands"),
    ("rm -Rf /", "blocked_commands"),
    ("rm --recursive --force /", "blocked_commands"),
    ("rm -rf /*", "blocked_commands"),
    ("rm -rf //", "blocked_commands"),
    ("rm -rf /.", "blocked_commands"),
    ("rm -rf '/'", "blocked_commands"),
    ("rm -rf ../../..", "blocked_commands"),
    ("\\rm -rf /", "blocked_commands"),
    ("rm -rf /tmp/x", ""),
    ("rm -rf build", ""),
    ("rm -f /", ""),
    ("chmod 777 x", "blocked_commands"),
    ("chmod -R 0777 .", "blocked_commands"),
    ("chmod a+rwx x", "blocked_commands"),
    ("chmod 755 x", ""),
    ("chmod +x x", ""),
    ("mkfs.ext4 /dev/sda1", "blocked_commands"),
    ("mkfs /dev/sda1", "blocked_commands"),
    ("dd if=x of=/dev/sda", "blocked_commands"),
    ("dd if=x of=//dev/../dev/sda", "blocked_commands"),
    ("dd if=/dev/zero of=out.img bs=1 count=1", ""),
    ("cat ~/.ssh/id_rsa", "blocked_paths"),
    ("cat $HOME/.ssh/id_rsa", "blocked_paths"),
    ("cat \"${HOME}/.aws/credentials\"", "blocked_paths"),
    ("cat ~/.ss*/id_rsa", "blocked_paths"),
    ("cat ../.gnupg/x", "blocked_paths"),
    ("cd .. && cat .ssh/id_rsa", "blocked_paths"),
    ("cd ~ && cat .config/gh/hosts.yml", "blocked_paths"),
    ("cat .env", "blocked_paths"),
    ("cat sub/.env", "blocked_paths"),
    ("grep KEY < .env", "blocked_paths"),
    ("cat /proc/self/environ", "blocked_paths"),
    ("cat /proc/$PPID/environ", "blocked_paths"),
    ("tar czf x.tgz --files-from=~/.ssh/list", "blocked_paths"),
    ("cp ~/.aws/credentials .", "blocked_paths"),
    ("cat .env.example", ""),
    ("cat src/main.rs", ""),
    ("echo x > .git/hooks/pre-commit", "protected_paths"),
    ("echo x >> .github/workflows/ci.yml", "protected_paths"),
    ("cp evil .git/hooks/pre-commit", "protected_paths"),
    ("rm -rf .git", "protected_paths"),
    ("sed -i s/a/b/ tasks/t.yaml", "protected_paths"),
    ("tee /tmp/gh/env", "protected_paths"),
    ("echo X=1 >> $GITHUB_ENV", "protected_paths"),
    ("echo x >> \"${GITHUB_OUTPUT}\"", "protected_paths"),
    ("cat .git/config", ""),
    ("git status", ""),
    ("cat tasks/t.yaml", ""),
];

#[test]
fn shell_guards() {
    for (command, expected) in SHELL {
        let check = shell(command);
        let name = check.hit.as_ref().map_or("", |hit| hit.name);
        assert_eq!(name, *expected, "{command:?}: {:?}", check.hit);
    }
}

/// (command, hazard the guard adds)
const HAZARDS: &[(&str, HazardKind)] = &[
    ("cargo test > ../out", HazardKind::RedirectOutside),
    ("cargo test > /etc/x", HazardKind::RedirectOutside),
    ("cargo test < /etc/passwd", HazardKind::RedirectOutside),
    ("cargo test > ~/x", HazardKind::RedirectOutside),
    ("cd .. && cargo test > x", HazardKind::RedirectOutside),
    ("ls ~", HazardKind::ContainsBlockedPath),
    ("grep -r KEY /", HazardKind::ContainsBlockedPath),
    ("cd /tmp && ls", HazardKind::UnknownDirectory),
    ("cd $X && ls", HazardKind::UnknownDirectory),
];

#[test]
fn shell_hazards() {
    for (command, kind) in HAZARDS {
        let check = shell(command);
        assert!(check.hit.is_none(), "{command:?}: {:?}", check.hit);
        assert!(
            check.hazards.iter().any(|h| h.kind == *kind),
            "{command:?} should carry {kind:?}: {:?}",
            check.hazards
        );
    }
}

#[test]
fn fine_redirections() {
    for command in [
        "cargo test 2>&1 | tail",
        "cargo test > /dev/null 2>&1",
        "cargo test > target/out.txt",
        "cargo test &> log",
        "cat < Cargo.toml",
        "cargo test > /opt/shared/x",
    ] {
        let check = shell(command);
        assert!(
            check.hit.is_none() && check.hazards.is_empty(),
            "{command:?}: {check:?}"
        );
    }
}

/// (tool, path, the guard that must fire, or "")
const PATHS: &[(&str, &str, &str)] = &[
    ("read_file", "src/lib.rs", ""),
    ("read_file", "/home/u/w/src/lib.rs", ""),
    ("read_file", "~/.ssh/id_rsa", "blocked_paths"),
    ("read_file", "/home/u/.aws/credentials", "blocked_paths"),
    ("read_file", ".env", "blocked_paths"),
    ("write_file", "config/.env", "blocked_paths"),
    ("read_file", "../outside/secret", "outside_workdir"),
    ("read_file", "/etc/passwd", "outside_workdir"),
    ("read_file", "/opt/shared/data", ""),
    ("read_file", ".git/config", ""),
    ("write_file", ".git/hooks/pre-commit", "protected_paths"),
    ("edit_file", ".git/config", "protected_paths"),
    ("write_file", "sub/.git/config", "protected_paths"),
    ("write_file", "src/../.git/config", "protected_paths"),
    ("write_file", ".github/workflows/ci.yml", "protected_paths"),
    ("write_file", ".github/dependabot.yml", ""),
    ("write_file", "tasks/t.yaml", "protected_paths"),
    ("write_file", "/tmp/gh/env", "protected_paths"),
    ("write_file", "src/new.rs", ""),
];

#[test]
fn path_guards() {
    let guards = guards();
    for (tool, path, expected) in PATHS {
        let hit = guards.check_path(tool, path);
        assert_eq!(
            hit.as_ref().map_or("", |h| h.name),
            *expected,
            "{tool}({path}): {hit:?}"
        );
    }
}

#[test]
fn rule_paths_are_relative_inside_the_workdir() {
    let guards = guards();
    assert_eq!(guards.rule_path("./src/../src/lib.rs"), "src/lib.rs");
    assert_eq!(guards.rule_path("/home/u/w/src/a.rs"), "src/a.rs");
    assert_eq!(guards.rule_path("."), ".");
    assert_eq!(guards.rule_path("/etc/passwd"), "/etc/passwd");
}

#[test]
fn bad_entries_are_errors() {
    let mut settings = GuardSettings::new("/w", None);
    settings.blocked_commands.push(String::new());
    assert!(Guards::new(&settings).is_err());
    let mut settings = GuardSettings::new("/w", None);
    settings.blocked_paths.push(" ".to_owned());
    assert!(Guards::new(&settings).is_err());
}

#[test]
fn details_say_why() {
    let hit = shell("rm -fr /").hit.unwrap();
    assert_eq!(hit.detail, "`rm -fr /` matches blocked command `rm -rf /`");
    let hit = guards().check_path("read_file", "~/.ssh/id_rsa").unwrap();
    assert_eq!(hit.detail, "`~/.ssh/id_rsa` is under blocked path `~/.ssh`");
}
