//! git: the options and subcommands that run a program.

use super::{Analysis, HazardKind, SimpleCommand, abbreviates};

/// git's options before its subcommand (`-c`, `-C DIR`, `--git-dir`…):
/// those that may run a program are hazards. Returns where the
/// subcommand is.
pub(super) fn git_options(argv: &[String], analysis: &mut Analysis) -> usize {
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        match word.as_str() {
            "-c" | "--config-env" => {
                analysis.hazard(HazardKind::RunsProgram, &format!("git {word}"));
                index += 2;
            }
            // Another directory's repository configuration (one the model
            // may have written outside `.git`) can run programs: an alias
            // `!cmd`, `core.fsmonitor`, `core.sshCommand`.
            "-C" | "--git-dir" => {
                if argv.get(index + 1).is_none_or(|dir| dir != ".") {
                    analysis.hazard(HazardKind::RunsProgram, &format!("git {word} DIR"));
                }
                index += 2;
            }
            "--work-tree" | "--namespace" | "--super-prefix" => index += 2,
            _ if word.starts_with("--git-dir=") => {
                analysis.hazard(HazardKind::RunsProgram, "git --git-dir=DIR");
                index += 1;
            }
            _ if word.starts_with("--config-env=") || word.starts_with("--exec-path=") => {
                analysis.hazard(HazardKind::RunsProgram, &format!("git {word}"));
                index += 1;
            }
            _ if word.starts_with('-') => index += 1,
            _ => break,
        }
    }
    index
}

/// `git -c key=value …`, and subcommands that run a command or hook.
pub(super) fn git(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let index = git_options(argv, analysis);
    let Some(subcommand) = argv.get(index) else {
        return;
    };
    let rest = &argv[index + 1..];
    // git accepts any unique abbreviation of a long option (`--up=` for
    // `git clone --upload-pack`): every prefix counts.
    let runs = |flags: &[&str]| {
        rest.iter().take_while(|w| *w != "--").any(|w| {
            flags.iter().any(|flag| {
                w == flag
                    || w.starts_with(&format!("{flag}="))
                    || (flag.starts_with("--") && abbreviates(w, flag, 3))
                    || (flag.len() == 2 && !flag.starts_with("--") && w.starts_with(flag))
            })
        })
    };
    // A short-option cluster (`-yxsh`) containing one of `letters`.
    let cluster = |letters: &[char]| {
        rest.iter()
            .take_while(|w| *w != "--")
            .filter(|w| w.starts_with('-') && !w.starts_with("--") && w.len() > 1)
            .any(|w| w[1..].chars().any(|c| letters.contains(&c)))
    };
    let via = format!("git {subcommand}");
    match subcommand.as_str() {
        "submodule" if rest.first().is_some_and(|w| w == "foreach") => {
            analysis.hazard(HazardKind::RunsProgram, "git submodule foreach");
            let code: Vec<&str> = rest[1..]
                .iter()
                .map(String::as_str)
                .skip_while(|w| w.starts_with('-'))
                .collect();
            analysis.script(code.join(" "), &via);
        }
        "bisect" if rest.first().is_some_and(|w| w == "run") => {
            analysis.hazard(HazardKind::RunsProgram, "git bisect run");
            analysis.command(cmd, index + 2, index + 2, &via);
        }
        "filter-branch" => analysis.hazard(HazardKind::RunsProgram, "git filter-branch"),
        "rebase" if runs(&["-x", "--exec"]) => {
            analysis.hazard(HazardKind::RunsProgram, "git rebase --exec");
        }
        "difftool" | "mergetool" if runs(&["--extcmd", "--tool"]) || cluster(&['x', 't']) => {
            analysis.hazard(HazardKind::RunsProgram, &format!("{via} --extcmd"));
        }
        "grep" if runs(&["--open-files-in-pager"]) || cluster(&['O']) => {
            analysis.hazard(HazardKind::RunsProgram, "git grep --open-files-in-pager");
        }
        "send-email"
            if runs(&[
                "--sendmail-cmd",
                "--smtp-server",
                "--to-cmd",
                "--cc-cmd",
                "--header-cmd",
            ]) =>
        {
            analysis.hazard(HazardKind::RunsProgram, "git send-email --sendmail-cmd");
        }
        "help" if runs(&["--web", "--man", "--info"]) || cluster(&['w', 'm', 'i']) => {
            analysis.hazard(HazardKind::RunsProgram, "git help --web");
        }
        // `git remote-ext URL CMD` runs CMD when asked to connect;
        // `git daemon --access-hook=CMD` runs CMD for each request.
        "instaweb" | "web--browse" | "remote-ext" => analysis.hazard(HazardKind::RunsProgram, &via),
        "daemon" if rest.iter().any(|w| w.starts_with("--access-hook")) => {
            analysis.hazard(HazardKind::RunsProgram, "git daemon --access-hook");
        }
        // The receiving repository runs its hooks (and its `core.hooksPath`):
        // a local one may be a directory the model wrote.
        "push" | "send-pack" if pushes_to_a_local_repository(rest) => {
            analysis.hazard(
                HazardKind::RunsProgram,
                &format!("git {subcommand} to a local repository (runs its hooks)"),
            );
        }
        "receive-pack" => {
            analysis.hazard(HazardKind::RunsProgram, "git receive-pack (runs hooks)");
        }
        "config"
            if rest.iter().filter(|w| !w.starts_with('-')).count() >= 2
                && !plain_git_setting(rest) =>
        {
            analysis.hazard(HazardKind::RunsProgram, "git config (sets a value)");
        }
        _ => {}
    }
    // The program run on the other side (`--upload-pack`), a template
    // directory's hooks, a clone's configuration.
    let remote_program = runs(&["--upload-pack", "--receive-pack", "--exec", "--template"])
        && matches!(
            subcommand.as_str(),
            "clone" | "fetch" | "pull" | "push" | "ls-remote" | "archive" | "init" | "submodule"
        );
    if remote_program || (subcommand == "clone" && runs(&["-u", "-c", "--config"])) {
        let what = format!("git {subcommand} --upload-pack");
        analysis.hazard(HazardKind::RunsProgram, &what);
    }
}

/// `git config [--global|--local|--replace-all|--add] KEY VALUE` of a
/// key that names no program, hook, filter, alias or included file.
pub(super) fn plain_git_setting(rest: &[String]) -> bool {
    const KEYS: &[&str] = &[
        "user.name",
        "user.email",
        "init.defaultbranch",
        "pull.rebase",
        "pull.ff",
        "push.default",
        "push.autosetupremote",
        "fetch.prune",
        "merge.ff",
        "rebase.autosquash",
        "rebase.autostash",
        "core.autocrlf",
        "core.filemode",
        "core.ignorecase",
        "core.quotepath",
        "core.safecrlf",
        "color.ui",
        "advice.detachedhead",
        "commit.gpgsign",
        "tag.gpgsign",
        "diff.renames",
        "log.date",
    ];
    let mut words = rest.iter();
    let mut operands = Vec::new();
    for word in words.by_ref() {
        match word.as_str() {
            "--global" | "--local" | "--replace-all" | "--add" | "--unset" | "--unset-all" => {}
            option if option.starts_with('-') => return false,
            operand => operands.push(operand),
        }
    }
    operands.len() == 2 && KEYS.contains(&operands[0].to_ascii_lowercase().as_str())
}

/// `git push ARGS`: true when the repository it names (the first word
/// that is not an option, or `--repo=`) is a path or a `file://` URL, not
/// a network URL (`https://…`, `ssh://…`, `host:path`) or a remote's name.
/// `git push` with no repository uses the configured remote. (A name with
/// no remote of that name is a path to git: docs/policy.md says so.)
pub(super) fn pushes_to_a_local_repository(rest: &[String]) -> bool {
    let mut words = rest.iter();
    let mut repository = None;
    while let Some(word) = words.next() {
        if word == "--" {
            repository = words.next().map(String::as_str);
            break;
        }
        if let Some(value) = word.strip_prefix("--repo=") {
            repository = Some(value);
            break;
        }
        if matches!(word.as_str(), "-o" | "--push-option" | "--repo") {
            if word == "--repo" {
                repository = words.next().map(String::as_str);
                break;
            }
            words.next();
            continue;
        }
        if !word.starts_with('-') {
            repository = Some(word.as_str());
            break;
        }
    }
    let Some(repository) = repository else {
        return false;
    };
    match repository.split_once("://") {
        Some((scheme, _)) => scheme.eq_ignore_ascii_case("file"),
        // scp-like `host:path`: a colon before any slash.
        None if repository
            .split_once(':')
            .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/')) =>
        {
            false
        }
        // A name (`origin`) is taken for a configured remote; a path is not.
        None => repository.contains('/') || repository.starts_with(['.', '~']),
    }
}
