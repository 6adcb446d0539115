//! Why user namespaces are refused where AppArmor restricts them
//! (Ubuntu 23.10 and later, GitHub's `ubuntu-24.04` runners:
//! `kernel.apparmor_restrict_unprivileged_userns = 1`), and the fix
//! Ubuntu documents for bwrap: a narrow profile that lets one binary, at
//! one root-owned path, make them (docs/sandbox.md, "AppArmor"). The
//! restriction itself is never turned off machine-wide.

use std::path::{Path, PathBuf};

/// The switch, as `/proc` has it.
pub const RESTRICT_SYSCTL: &str = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";
/// Where the fix installs ybs: root-owned, so that no one else can put
/// another program at the path the profile names.
pub const INSTALL_PATH: &str = "/usr/local/lib/ybs/ybs";
/// Where the fix writes the profile.
pub const PROFILE_PATH: &str = "/etc/apparmor.d/ybs";

/// AppArmor's restriction is why namespaces are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restricted {
    /// The running binary, when it must be installed root-owned first
    /// (a user-writable path would hand `userns` to whatever is copied
    /// there); `None` when it already is.
    pub install_from: Option<PathBuf>,
    /// The path the profile names.
    pub binary: PathBuf,
}

/// Whether the restriction explains why namespaces are refused (when
/// `refused`): the switch (`sysctl`, the file's content) is 1. `exe`: the running
/// binary; `exe_root_owned`: it and every directory above it belong to
/// root and no one else may write them.
pub fn diagnose(
    refused: bool,
    sysctl: Option<&str>,
    exe: Option<&Path>,
    exe_root_owned: bool,
) -> Option<Restricted> {
    if !refused || sysctl.map(str::trim) != Some("1") {
        return None;
    }
    Some(match exe {
        Some(exe) if exe_root_owned => Restricted {
            install_from: None,
            binary: exe.to_path_buf(),
        },
        exe => Restricted {
            install_from: Some(exe.map_or_else(|| PathBuf::from("ybs"), Path::to_path_buf)),
            binary: PathBuf::from(INSTALL_PATH),
        },
    })
}

/// [`diagnose`] for this machine and this binary, `refused`: the probe
/// found no namespaces.
pub fn current(refused: bool) -> Option<Restricted> {
    if !refused {
        return None;
    }
    let sysctl = std::fs::read_to_string(RESTRICT_SYSCTL).ok();
    let exe = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok());
    let safe = exe.as_deref().is_some_and(root_owned);
    diagnose(refused, sysctl.as_deref(), exe.as_deref(), safe)
}

/// `path` and every directory above it belong to root, and neither group
/// nor others may write them.
#[cfg(unix)]
fn root_owned(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    path.ancestors().all(|path| {
        std::fs::metadata(path).is_ok_and(|meta| meta.uid() == 0 && meta.mode() & 0o022 == 0)
    })
}

#[cfg(not(unix))]
fn root_owned(_path: &Path) -> bool {
    false
}

impl Restricted {
    /// The cause, in one line.
    pub fn cause(&self) -> String {
        "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, as on Ubuntu 23.10 and later)".to_owned()
    }

    /// The profile that lets the binary make user namespaces, and nothing
    /// else (`flags=(unconfined)`: it confines nothing it did not before).
    pub fn profile(&self) -> String {
        profile(&self.binary)
    }

    /// The fix as shell commands, one a line.
    pub fn commands(&self) -> Vec<String> {
        let mut commands = Vec::new();
        if let Some(from) = &self.install_from {
            commands.push(format!(
                "sudo install -D -o root -g root -m 0755 {} {}",
                quote(&from.display().to_string()),
                quote(&self.binary.display().to_string())
            ));
        }
        let lines: Vec<String> = self.profile().lines().map(quote).collect();
        commands.push(format!(
            "printf '%s\\n' {} | sudo tee {PROFILE_PATH} > /dev/null",
            lines.join(" ")
        ));
        commands.push(format!("sudo apparmor_parser -r {PROFILE_PATH}"));
        commands.push(format!(
            "{} sandbox check",
            quote(&self.binary.display().to_string())
        ));
        commands
    }

    /// The fix in one line, for a refusal.
    pub fn fix(&self) -> String {
        let install = match &self.install_from {
            Some(_) => format!("install ybs root-owned at {INSTALL_PATH}, "),
            None => String::new(),
        };
        format!(
            "{install}load a narrow AppArmor profile for {} with `userns,` (sudo apparmor_parser -r {PROFILE_PATH}) and run ybs from that path; `ybs sandbox check` prints the commands (docs/sandbox.md); never turn the restriction off machine-wide",
            self.binary.display()
        )
    }
}

/// The AppArmor profile for `binary` (Ubuntu's, for bwrap).
pub fn profile(binary: &Path) -> String {
    let path = binary.display().to_string();
    let path = if path.contains(char::is_whitespace) {
        format!("\"{path}\"")
    } else {
        path
    };
    format!(
        "abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile ybs {path} flags=(unconfined) {{\n  userns,\n\n  include if exists <local/ybs>\n}}\n"
    )
}

/// `text` as one shell word.
fn quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c))
    {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restriction_is_the_cause_only_when_on_and_namespaces_are_refused() {
        let exe = Path::new("/home/runner/bin/ybs");
        assert_eq!(diagnose(false, Some("1\n"), Some(exe), false), None);
        assert_eq!(diagnose(true, Some("0\n"), Some(exe), false), None);
        assert_eq!(diagnose(true, None, Some(exe), false), None);
        let restricted = diagnose(true, Some("1\n"), Some(exe), false).unwrap();
        assert_eq!(restricted.binary, Path::new(INSTALL_PATH));
        assert_eq!(restricted.install_from.as_deref(), Some(exe));
        assert!(
            restricted
                .cause()
                .contains("apparmor_restrict_unprivileged_userns = 1")
        );
    }

    #[test]
    fn a_user_writable_binary_is_installed_root_owned_before_the_profile_names_it() {
        let exe = Path::new("/home/runner/bin/ybs");
        let restricted = diagnose(true, Some("1"), Some(exe), false).unwrap();
        let commands = restricted.commands();
        assert_eq!(
            commands[0],
            "sudo install -D -o root -g root -m 0755 /home/runner/bin/ybs /usr/local/lib/ybs/ybs"
        );
        assert!(commands[1].ends_with("| sudo tee /etc/apparmor.d/ybs > /dev/null"));
        assert!(commands[1].contains("'profile ybs /usr/local/lib/ybs/ybs flags=(unconfined) {'"));
        assert!(commands[1].contains("'  userns,'"));
        assert_eq!(commands[2], "sudo apparmor_parser -r /etc/apparmor.d/ybs");
        assert_eq!(commands[3], "/usr/local/lib/ybs/ybs sandbox check");
        assert!(!commands.iter().any(|command| command.contains("sysctl")));
        assert!(
            restricted
                .fix()
                .contains("root-owned at /usr/local/lib/ybs/ybs")
        );
        assert!(restricted.fix().contains("never turn the restriction off"));

        // A binary that already is root-owned is named where it is.
        let exe = Path::new("/usr/bin/ybs");
        let restricted = diagnose(true, Some("1"), Some(exe), true).unwrap();
        assert_eq!(restricted.install_from, None);
        assert_eq!(restricted.commands().len(), 3);
        assert!(
            restricted
                .profile()
                .contains("profile ybs /usr/bin/ybs flags")
        );
    }

    /// The printed command writes exactly the profile.
    #[test]
    fn the_printed_command_writes_the_profile() {
        let restricted = diagnose(true, Some("1"), Some(Path::new("/opt/x/ybs")), false).unwrap();
        let write = restricted.commands()[1]
            .strip_suffix(&format!(" | sudo tee {PROFILE_PATH} > /dev/null"))
            .unwrap()
            .to_owned();
        let output = std::process::Command::new("sh")
            .args(["-c", &write])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            restricted.profile()
        );
    }

    #[test]
    fn the_profile_grants_userns_to_one_path() {
        assert_eq!(
            profile(Path::new(INSTALL_PATH)),
            "abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile ybs /usr/local/lib/ybs/ybs flags=(unconfined) {\n  userns,\n\n  include if exists <local/ybs>\n}\n"
        );
        assert!(profile(Path::new("/opt/my tools/ybs")).contains("\"/opt/my tools/ybs\""));
        assert_eq!(quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn a_directory_others_may_write_is_not_root_owned() {
        assert!(!root_owned(&std::env::temp_dir().join("nothing-here")));
        assert!(!root_owned(Path::new("/tmp")));
    }
}
