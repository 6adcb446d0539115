use super::*;

fn kinds(command: &str) -> Vec<HazardKind> {
    let mut kinds: Vec<HazardKind> = parse(command).hazards.iter().map(|h| h.kind).collect();
    kinds.dedup();
    kinds
}

fn has(command: &str, kind: HazardKind) -> bool {
    kinds(command).contains(&kind)
}

/// (command, top-level argvs joined by spaces, hazard-free?)
const SPLITS: &[(&str, &[&str], bool)] = &[
    ("cargo test", &["cargo test"], true),
    ("cargo test && curl x", &["cargo test", "curl x"], true),
    ("a; b || c | d & e", &["a", "b", "c", "d", "e"], true),
    ("a\nb\n\nc", &["a", "b", "c"], true),
    ("a |& b", &["a", "b"], true),
    ("grep \"a|b\" file", &["grep a|b file"], true),
    ("grep 'a;b' file", &["grep a;b file"], true),
    ("echo '$(not run)'", &["echo $(not run)"], true),
    ("echo \"it's\"", &["echo it's"], true),
    ("echo a\\ b", &["echo a b"], true),
    ("c'a'r\"g\"o test", &["cargo test"], true),
    ("\\rm -rf x", &["rm -rf x"], true),
    ("cargo test \\\n  --quiet", &["cargo test --quiet"], true),
    ("cargo test # ; rm -rf /", &["cargo test"], true),
    ("echo a#b", &["echo a#b"], true),
    ("ls ./*.rs src/*.rs", &["ls ./*.rs src/*.rs"], true),
    ("X=1 Y=2 cargo test", &["cargo test"], true),
    ("! grep x f", &["grep x f"], true),
    ("echo \"\\$HOME\"", &["echo $HOME"], true),
    (
        "set -euo pipefail; cargo test",
        &["set -euo pipefail", "cargo test"],
        true,
    ),
    ("echo [x", &["echo [x"], true),
    ("[ -f x ] && echo y", &["[ -f x ]", "echo y"], true),
    ("echo {}", &["echo {}"], true),
];

#[test]
fn splits_and_removes_quotes() {
    for (command, expected, clean) in SPLITS {
        let parsed = parse(command);
        let top: Vec<String> = parsed
            .parts
            .iter()
            .filter(|p| p.via.is_none())
            .map(SimpleCommand::argv_text)
            .collect();
        assert_eq!(top, *expected, "parts of {command:?}");
        assert_eq!(
            parsed.hazards.is_empty(),
            *clean,
            "hazards of {command:?}: {:?}",
            parsed.hazards
        );
    }
}

/// (command, a hazard it must carry)
const HAZARDS: &[(&str, HazardKind)] = &[
    ("echo $(rm -rf x)", HazardKind::CommandSubstitution),
    ("echo \"$(rm -rf x)\"", HazardKind::CommandSubstitution),
    ("echo `rm -rf x`", HazardKind::Backticks),
    ("echo \"`rm -rf x`\"", HazardKind::Backticks),
    ("diff <(a) <(b)", HazardKind::ProcessSubstitution),
    ("tee >(sh)", HazardKind::ProcessSubstitution),
    ("echo $((x+2))", HazardKind::Arithmetic),
    ("echo $[1+2]", HazardKind::Arithmetic),
    ("echo ${a[i]}", HazardKind::Arithmetic),
    ("(( x ))", HazardKind::Arithmetic),
    ("$X arg", HazardKind::ExpansionInCommandWord),
    ("${X} arg", HazardKind::ExpansionInCommandWord),
    ("cat${IFS}file", HazardKind::ExpansionInCommandWord),
    ("* arg", HazardKind::ExpansionInCommandWord),
    ("echo $HOME", HazardKind::Variable),
    ("echo ${X:-$(id)}", HazardKind::CommandSubstitution),
    ("cargo test > $OUT", HazardKind::Variable),
    ("echo $'\\x72m'", HazardKind::AnsiCQuote),
    ("{rm,-rf,x}", HazardKind::BraceExpansion),
    ("echo {1..3}", HazardKind::BraceExpansion),
    ("cat ~root/x", HazardKind::TildeUser),
    ("rg foo *", HazardKind::GlobMayBeOption),
    ("ls *.rs", HazardKind::GlobMayBeOption),
    ("eval 'rm -rf x'", HazardKind::Eval),
    ("exec rm x", HazardKind::Exec),
    ("sh -c 'rm x'", HazardKind::NestedShell),
    ("bash -c 'rm x'", HazardKind::NestedShell),
    ("zsh -c 'rm x'", HazardKind::NestedShell),
    ("dash -c 'rm x'", HazardKind::NestedShell),
    ("bash -lc 'rm x'", HazardKind::NestedShell),
    ("sh -ec 'rm x'", HazardKind::NestedShell),
    ("bash -o pipefail -c 'rm x'", HazardKind::NestedShell),
    ("/bin/bash -c x", HazardKind::NestedShell),
    ("curl x | sh", HazardKind::NestedShell),
    ("bash -s < x", HazardKind::NestedShell),
    ("python3 -c 'import os'", HazardKind::InlineCode),
    ("perl -ne 'print' f", HazardKind::InlineCode),
    ("node -e 'x'", HazardKind::InlineCode),
    ("awk '{system(\"id\")}' f", HazardKind::InlineCode),
    ("sed -n '1e id' f", HazardKind::InlineCode),
    ("sed 's/a/b/e' f", HazardKind::InlineCode),
    ("sed 'r /etc/passwd' f", HazardKind::InlineCode),
    ("env X=1 rm x", HazardKind::RunsProgram),
    ("env -S 'rm x'", HazardKind::RunsProgram),
    ("command rm x", HazardKind::RunsProgram),
    ("builtin cd x", HazardKind::RunsProgram),
    ("nice -n 5 rm x", HazardKind::RunsProgram),
    ("timeout 5 rm x", HazardKind::RunsProgram),
    ("xargs rm", HazardKind::RunsProgram),
    ("find . -exec rm {} \\;", HazardKind::RunsProgram),
    ("find . -execdir rm {} +", HazardKind::RunsProgram),
    ("git -c core.pager=id log", HazardKind::RunsProgram),
    ("git clone -u x url", HazardKind::RunsProgram),
    ("git rebase --exec 'id' main", HazardKind::RunsProgram),
    ("rg --pre ./x foo", HazardKind::RunsProgram),
    ("rg --pre=./x foo", HazardKind::RunsProgram),
    (
        "cargo test --config 'build.rustc-wrapper=\"x\"'",
        HazardKind::RunsProgram,
    ),
    ("tar --to-command=sh -xf a.tar", HazardKind::RunsProgram),
    ("source ./x.sh", HazardKind::ChangesShell),
    (". ./x.sh", HazardKind::ChangesShell),
    ("alias ls=rm", HazardKind::ChangesShell),
    ("PATH=. cargo test", HazardKind::HijackVariable),
    ("LD_PRELOAD=x.so cargo test", HazardKind::HijackVariable),
    ("export GIT_SSH_COMMAND=x", HazardKind::HijackVariable),
    ("RUSTC_WRAPPER=x cargo build", HazardKind::HijackVariable),
    ("(rm x)", HazardKind::Subshell),
    ("{ rm x; }", HazardKind::BraceGroup),
    ("if true; then rm x; fi", HazardKind::ControlFlow),
    ("for f in a; do rm $f; done", HazardKind::ControlFlow),
    ("cat <<EOF\nx\nEOF", HazardKind::HereDoc),
    ("echo 'unterminated", HazardKind::Unparseable),
    ("echo \"unterminated", HazardKind::Unparseable),
    ("echo `unterminated", HazardKind::Unparseable),
    ("echo $(unterminated", HazardKind::Unparseable),
    ("echo a)", HazardKind::Unparseable),
    ("f() { rm x; }", HazardKind::ControlFlow),
    ("case x in a) rm;; esac", HazardKind::ControlFlow),
    ("case x in a) rm;; esac; esac", HazardKind::Unparseable),
    ("case x in a) rm;;", HazardKind::Unparseable),
    ("echo >", HazardKind::Unparseable),
];

#[test]
fn flags_every_hazard_family() {
    for (command, kind) in HAZARDS {
        assert!(
            has(command, *kind),
            "{command:?} should carry {kind:?}, has {:?}",
            kinds(command)
        );
    }
}

#[test]
fn not_flagged_when_harmless() {
    for command in [
        "python3 script.py",
        "python -m pytest -q",
        "bash scripts/test.sh",
        "node --version",
        "sed -n 's/a/b/p' f",
        "sed -e 's/x/y/g' -e '1d' f",
        "awk '{print $1}' f",
        "git log --oneline -5",
        "git push -u origin main",
        "command -v cargo",
        "env",
        "cargo test -- --config",
        "echo \"a$\"",
        "git config user.name",
    ] {
        assert!(
            parse(command).hazards.is_empty(),
            "{command:?} has {:?}",
            parse(command).hazards
        );
    }
}

/// (command, every argv found, nested included, joined by spaces)
const NESTED: &[(&str, &[&str])] = &[
    ("echo $(rm -rf x)", &["rm -rf x", "echo $(rm -rf x)"]),
    ("echo `sudo id`", &["sudo id", "id", "echo `sudo id`"]),
    (
        "bash -c 'curl x; rm y'",
        &["bash -c curl x; rm y", "curl x", "rm y"],
    ),
    ("eval \"rm\" -rf x", &["eval rm -rf x", "rm -rf x"]),
    ("env X=1 rm -rf x", &["env X=1 rm -rf x", "rm -rf x"]),
    ("command rm x", &["command rm x", "rm x"]),
    (
        "timeout -s KILL 5 sudo id",
        &["timeout -s KILL 5 sudo id", "sudo id", "id"],
    ),
    (
        "nice -n 5 timeout 9 rm x",
        &["nice -n 5 timeout 9 rm x", "timeout 9 rm x", "rm x"],
    ),
    (
        "find . -name a -exec rm {} \\;",
        &["find . -name a -exec rm {} ;", "rm {}"],
    ),
    ("xargs -I{} rm {}", &["xargs -I{} rm {}", "rm {}"]),
    ("(cd x && rm y)", &["cd x", "rm y"]),
    (
        "watch -n 1 'ls; rm x'",
        &["watch -n 1 ls; rm x", "ls", "rm x"],
    ),
    ("flock /tmp/l -c 'rm x'", &["flock /tmp/l -c rm x", "rm x"]),
    ("cat <(curl x)", &["curl x", "cat <(curl x)"]),
    ("cat <<EOF\n$(rm x)\nEOF", &["cat", "rm x"]),
    ("cat <<'EOF'\n$(rm x)\nEOF", &["cat"]),
    ("if grep -q x f; then rm f; fi", &["grep -q x f", "rm f"]),
];

#[test]
fn nested_commands_are_parts() {
    for (command, expected) in NESTED {
        let mut found: Vec<String> = parse(command)
            .parts
            .iter()
            .map(SimpleCommand::argv_text)
            .collect();
        let mut expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "parts of {command:?}");
    }
}

#[test]
fn env_unwraps_assignments() {
    let parsed = parse("env -i X=1 rm -rf x");
    let inner = parsed.parts.iter().find(|p| p.via.is_some()).unwrap();
    assert_eq!(inner.assignments, vec!["X=1"]);
    assert_eq!(inner.argv, vec!["rm", "-rf", "x"]);
    assert_eq!(inner.via.as_deref(), Some("env"));
    assert_eq!(inner.text(), "X=1 rm -rf x");
}

#[test]
fn assignments_and_redirections() {
    let parsed = parse("X=1 Y='a b' cargo test 2>&1 > out.txt >> log < in &> all 3<> rw");
    let part = &parsed.parts[0];
    assert_eq!(part.assignments, vec!["X=1", "Y=a b"]);
    assert_eq!(part.argv, vec!["cargo", "test"]);
    let kinds: Vec<(Option<u32>, RedirectKind, &str)> = part
        .redirections
        .iter()
        .map(|r| (r.fd, r.kind, r.target.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (Some(2), RedirectKind::DupOutput, "1"),
            (None, RedirectKind::Output, "out.txt"),
            (None, RedirectKind::Append, "log"),
            (None, RedirectKind::Input, "in"),
            (None, RedirectKind::OutputAll, "all"),
            (Some(3), RedirectKind::ReadWrite, "rw"),
        ]
    );
    assert!(!part.redirections[0].opens_file());
    assert!(part.redirections[1].writes());
    assert!(!part.redirections[3].writes());
    assert_eq!(part.text(), "X=1 Y=a b cargo test");
    assert!(parsed.hazards.is_empty(), "{:?}", parsed.hazards);
}

#[test]
fn an_assignment_after_the_command_word_is_an_argument() {
    let part = &parse("make X=1").parts[0];
    assert!(part.assignments.is_empty());
    assert_eq!(part.argv, vec!["make", "X=1"]);
    let part = &parse("'X'=1 cmd").parts[0];
    assert_eq!(part.argv, vec!["X=1", "cmd"]);
}

#[test]
fn deny_views_strip_the_directory() {
    let part = &parse("X=1 /bin/rm -rf x").parts[0];
    assert_eq!(
        part.deny_views(),
        vec!["X=1 /bin/rm -rf x", "/bin/rm -rf x", "rm -rf x"]
    );
}

#[test]
fn hazards_point_at_their_part() {
    let parsed = parse("cargo test; echo $(id)");
    let hazard = parsed
        .hazards
        .iter()
        .find(|h| h.kind == HazardKind::CommandSubstitution)
        .unwrap();
    let part = &parsed.parts[hazard.part.unwrap()];
    assert_eq!(part.argv_text(), "echo $(id)");
    assert_eq!(hazard.to_string(), "command substitution `$(id)`");
}

#[test]
fn deep_nesting_fails_closed() {
    let deep = format!("{}x{}", "$(".repeat(40), ")".repeat(40));
    assert!(has(&deep, HazardKind::Unparseable));
    let deep = format!("{}x", "bash -c ".repeat(3));
    assert!(has(&deep, HazardKind::NestedShell));
}

#[test]
fn never_panics_on_odd_input() {
    for command in [
        "", " ", "\\", "'", "\"", "`", "$", "${", "$(", "<(", ")", "((", "<<", "<<EOF", "2>", "&&",
        "||", ";;", "|", "&>", "a\\", "${x", "$'\\x", "$'\\", "[", "[!", "~", "=", "\u{0}",
        "é$(ü)", "a=~:~", "\n\n",
    ] {
        let _ = parse(command);
    }
}

/// Programs that run programs (issue 10, item 11): wrappers, options that
/// execute, builtins evaluating subscripts, sed `e` in every spelling.
const RUNNERS: &[(&str, HazardKind)] = &[
    ("setarch x86_64 sh -c id", HazardKind::RunsProgram),
    ("setarch x86_64 -R id", HazardKind::RunsProgram),
    ("setarch -R id", HazardKind::RunsProgram),
    ("linux64 id", HazardKind::RunsProgram),
    ("prlimit --nofile=10 id", HazardKind::RunsProgram),
    ("setpriv --reuid=1 id", HazardKind::RunsProgram),
    ("capsh -- -c id", HazardKind::RunsProgram),
    ("capsh -- -c id", HazardKind::NestedShell),
    ("chroot / id", HazardKind::RunsProgram),
    ("unshare -r id", HazardKind::RunsProgram),
    ("nsenter -t 1 id", HazardKind::RunsProgram),
    ("flock /tmp/x -c id", HazardKind::RunsProgram),
    ("ionice -c 3 id", HazardKind::RunsProgram),
    ("chrt 1 id", HazardKind::RunsProgram),
    ("taskset 1 id", HazardKind::RunsProgram),
    ("stdbuf -oL id", HazardKind::RunsProgram),
    ("nohup id", HazardKind::RunsProgram),
    ("xvfb-run -a id", HazardKind::RunsProgram),
    ("watch id", HazardKind::RunsProgram),
    ("script -qc id /dev/null", HazardKind::RunsProgram),
    ("sg staff -c id", HazardKind::RunsProgram),
    ("sort --compress-program=sh x", HazardKind::RunsProgram),
    ("sort --compress-program sh x", HazardKind::RunsProgram),
    ("sort -S1 --compress-prog=sh x", HazardKind::RunsProgram),
    ("git grep -O foo", HazardKind::RunsProgram),
    ("git grep -nOvim foo", HazardKind::RunsProgram),
    (
        "git grep --open-files-in-pager=vim foo",
        HazardKind::RunsProgram,
    ),
    ("git grep --open-files=vim foo", HazardKind::RunsProgram),
    ("git difftool -x sh", HazardKind::RunsProgram),
    ("git difftool -y -xsh", HazardKind::RunsProgram),
    ("git difftool --ext=sh", HazardKind::RunsProgram),
    (
        "git send-email --sendmail-cmd=sh x",
        HazardKind::RunsProgram,
    ),
    ("ssh -o ProxyCommand=sh host", HazardKind::RunsProgram),
    ("ssh -oproxycommand=sh host", HazardKind::RunsProgram),
    ("ssh -o 'LocalCommand sh' host", HazardKind::RunsProgram),
    ("ssh -F cfg host", HazardKind::RunsProgram),
    ("scp -S ./x a b", HazardKind::RunsProgram),
    ("zip -TT sh x.zip a", HazardKind::RunsProgram),
    ("zip -TT=sh x.zip a", HazardKind::RunsProgram),
    ("zip --unzip-command sh x.zip a", HazardKind::RunsProgram),
    ("gdb -ex '!id'", HazardKind::RunsProgram),
    ("gdb -batch ./a", HazardKind::RunsProgram),
    ("vim -c '!id'", HazardKind::RunsProgram),
    ("vi '+!id' x", HazardKind::RunsProgram),
    ("nvim -S x.vim", HazardKind::RunsProgram),
    ("emacs --batch -l x.el", HazardKind::RunsProgram),
    ("sdiff --diff-program=sh a b", HazardKind::RunsProgram),
    ("diff3 --diff-program sh a b c", HazardKind::RunsProgram),
    ("sqlite3 db '.shell id'", HazardKind::RunsProgram),
    ("sqlite3 db 'select 1; .system id'", HazardKind::RunsProgram),
    (
        "sqlite3 -cmd '.shell id' db 'select 1'",
        HazardKind::RunsProgram,
    ),
    ("sqlite3 db", HazardKind::RunsProgram),
    (
        "sqlite3 db \"select load_extension('x')\"",
        HazardKind::RunsProgram,
    ),
    ("tar -I sh -xf x.tar", HazardKind::RunsProgram),
    ("tar xIf sh x.tar", HazardKind::RunsProgram),
    ("tar -xIsh -f x.tar", HazardKind::RunsProgram),
    ("tar --use-compress=sh -xf x.tar", HazardKind::RunsProgram),
    (
        "tar -xf x.tar --checkpoint-action exec=sh",
        HazardKind::RunsProgram,
    ),
    ("tar -xf x.tar --to-comm=sh", HazardKind::RunsProgram),
    ("rsync -e sh a b", HazardKind::RunsProgram),
    ("rsync -avze sh a b", HazardKind::RunsProgram),
    ("rsync --rsh=sh a b", HazardKind::RunsProgram),
    ("less x", HazardKind::RunsProgram),
    ("more x", HazardKind::RunsProgram),
    ("man --pager=sh ls", HazardKind::RunsProgram),
    ("man -P sh ls", HazardKind::RunsProgram),
    ("fd -x rm", HazardKind::RunsProgram),
    ("make CC=./x", HazardKind::RunsProgram),
    ("make --eval='x:;id'", HazardKind::RunsProgram),
    (
        "awk -e 'BEGIN{x=1}' -e 'BEGIN{system(\"id\")}'",
        HazardKind::InlineCode,
    ),
    (
        "awk --source='BEGIN{system(\"id\")}'",
        HazardKind::InlineCode,
    ),
    ("gawk -l ./x.so 'BEGIN{}'", HazardKind::InlineCode),
    ("awk -- 'BEGIN{system(\"id\")}'", HazardKind::InlineCode),
    ("printf -v 'a[$(id)]' x", HazardKind::Arithmetic),
    ("printf -v'a[$(id)]' x", HazardKind::Arithmetic),
    ("test -v 'a[$(id)]'", HazardKind::Arithmetic),
    ("[ -v 'a[$(id)]' ]", HazardKind::Arithmetic),
    ("let 'a[$(id)]=1'", HazardKind::Arithmetic),
    ("let x=y", HazardKind::Arithmetic),
    ("read 'a[$(id)]'", HazardKind::Arithmetic),
    ("unset 'a[$(id)]'", HazardKind::Arithmetic),
    ("declare 'a[$(id)]=1'", HazardKind::Arithmetic),
    ("typeset 'a[$(id)]'", HazardKind::Arithmetic),
    ("local 'a[$(id)]'", HazardKind::Arithmetic),
    ("declare -i x", HazardKind::Arithmetic),
    ("declare -n x=y", HazardKind::Arithmetic),
    ("wait -p 'a[$(id)]'", HazardKind::Arithmetic),
    ("mapfile -C id x", HazardKind::RunsProgram),
    ("mapfile -tC id x", HazardKind::RunsProgram),
    ("readarray -C id x", HazardKind::RunsProgram),
    ("compgen -C id", HazardKind::RunsProgram),
    ("compgen -F f", HazardKind::RunsProgram),
    ("compgen -W '$(id)'", HazardKind::RunsProgram),
    ("sed '\\%re%e' f", HazardKind::InlineCode),
    ("sed '1ecmd' f", HazardKind::InlineCode),
    ("sed '/re/I e' f", HazardKind::InlineCode),
    ("sed '$e' f", HazardKind::InlineCode),
    ("sed '1,3e id' f", HazardKind::InlineCode),
    ("sed -e 1p -e 'e id' f", HazardKind::InlineCode),
    ("sed --expression='e id' f", HazardKind::InlineCode),
    ("sed --expr 'e id' f", HazardKind::InlineCode),
    ("sed -ne 'e id' f", HazardKind::InlineCode),
    ("sed -n -s 'e id' f", HazardKind::InlineCode),
    ("sed -es/a/b/e f", HazardKind::InlineCode),
    ("sed -f script.sed f", HazardKind::InlineCode),
    ("sed -nf script.sed f", HazardKind::InlineCode),
    ("sed 'e' -- f", HazardKind::InlineCode),
    ("sed -e 'a\\' -e 'x' -e 'e' f", HazardKind::InlineCode),
    ("sed 's/a/b/w /tmp/x' f", HazardKind::InlineCode),
    ("sed 'k' f", HazardKind::InlineCode),
    ("ssh-agent id", HazardKind::RunsProgram),
    ("ccache ./x", HazardKind::RunsProgram),
    ("dbus-run-session id", HazardKind::RunsProgram),
    ("run-parts ./d", HazardKind::RunsProgram),
    ("npx -c id", HazardKind::RunsProgram),
    ("npm exec --call=id", HazardKind::RunsProgram),
    ("go test -exec ./x", HazardKind::RunsProgram),
    ("go build -toolexec=./x", HazardKind::RunsProgram),
    ("rustc -C linker=./x a.rs", HazardKind::RunsProgram),
    ("gcc -wrapper ./x a.c", HazardKind::RunsProgram),
    ("clang -fplugin=./x.so a.c", HazardKind::RunsProgram),
];

#[test]
fn programs_that_run_programs_are_flagged() {
    for (command, kind) in RUNNERS {
        assert!(
            has(command, *kind),
            "{command:?} should carry {kind:?}, has {:?}",
            kinds(command)
        );
    }
}

#[test]
fn their_harmless_forms_are_not() {
    for command in [
        "sort -u x",
        "sort --check x",
        "git grep -n foo",
        "git grep --or -e a -e b",
        "git difftool --no-prompt",
        "ssh-keygen -l -f key.pub",
        "zip -r x.zip a",
        "sqlite3 db 'select 1'",
        "tar -xzf x.tar.gz",
        "tar xzf x.tar.gz",
        "rsync -a src/ dst/",
        "man ls",
        "make",
        "make test",
        "make -j4 all",
        "printf -v x %s y",
        "printf '%s\\n' a",
        "test -f x",
        "read -r x",
        "unset x",
        "declare -a x",
        "mapfile -t x",
        "sed 's/x/y/' f",
        "sed -E 's/(a)e/\\1/' f",
        "sed -n '/start/,/end/p' f",
        "sed -e 's/a/b/' -e 's/c/d/' f",
        "sed -i.bak 's/a/b/' f",
        "sed -ie 's/a/b/' f",
        "sed '1d;$d' f",
        "awk '{print $1}' f",
        "gawk -f x.awk f",
        "go test ./...",
        "npm test",
        "gcc -O2 -o a a.c",
        "rustc -O a.rs",
    ] {
        let parsed = parse(command);
        assert!(
            parsed.hazards.is_empty(),
            "{command:?} is harmless, has {:?}",
            parsed.hazards
        );
    }
}

/// `a=(…)`, `for (( … ))` and `time ( … )` parse (a `(` after other
/// words stays unparseable); what runs inside is a part of its own.
#[test]
fn arrays_arithmetic_for_and_timed_subshells_parse() {
    let argvs = |command: &str| -> Vec<String> {
        parse(command)
            .parts
            .iter()
            .map(SimpleCommand::argv_text)
            .filter(|text| !text.is_empty())
            .collect()
    };
    let parsed = parse("a=(1 \"$b\" $(c x)) d=(2); echo ok");
    assert!(!has(
        "a=(1 \"$b\" $(c x)) d=(2); echo ok",
        HazardKind::Unparseable
    ));
    let assignment = parsed
        .parts
        .iter()
        .find(|p| !p.assignments.is_empty())
        .unwrap();
    assert_eq!(assignment.assignments, vec!["a=(1 $b $(c x))", "d=(2)"]);
    assert!(argvs("a=(1 \"$b\" $(c x)) d=(2); echo ok").contains(&"c x".to_owned()));
    let arithmetic = "for ((i=0;i<3;i++)); do echo $i; done";
    assert!(!has(arithmetic, HazardKind::Unparseable));
    assert!(has(arithmetic, HazardKind::Arithmetic));
    assert!(argvs(arithmetic).contains(&"echo $i".to_owned()));
    assert_eq!(argvs("time (make -j2)"), vec!["make -j2"]);
    assert!(argvs("declare -a a=(1 $(c y))").contains(&"c y".to_owned()));
    assert!(!has(
        "local -a a=(1 2); readonly b=(3)",
        HazardKind::Unparseable
    ));
    let fed = "while read -r l; do echo \"$l\"; done < <(find . -name x)";
    assert!(!has(fed, HazardKind::Unparseable));
    assert!(argvs(fed).contains(&"find . -name x".to_owned()));
    assert!(argvs("exec > >(tee log.txt) 2>&1").contains(&"tee log.txt".to_owned()));
    let regex = "[[ $s =~ ^v([0-9]+)$ ]] && echo \"${BASH_REMATCH[1]}\"";
    assert!(!has(regex, HazardKind::Unparseable));
    assert!(argvs(regex).iter().any(|a| a.starts_with("echo")));
    assert_eq!(argvs("time -p ( curl x )"), vec!["curl x"]);
    for unread in [
        "echo a=(b)",
        "x=(a",
        "for ((i=$(curl x);;)); do :; done",
        "for ((i=`curl x`;;)); do :; done",
        "for ((i=0;",
        "ls (a)",
        "time ls (a)",
        "echo x <<< <(a)",
        "[[ $x =~ ($(curl x)) ]]",
        "[[ $x =~ (a ]]",
        "cat <",
    ] {
        assert!(has(unread, HazardKind::Unparseable), "{unread}");
    }
}
