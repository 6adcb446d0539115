//! The policy's picture of a command checked against bash itself (issue
//! 27, docs/policy.md "Checked against bash").
//!
//! Commands come from a small grammar (words in every quoting, expansions,
//! assignments, redirections, here-strings and here-documents, pipelines,
//! lists, subshells, brace groups, control flow, and the wrappers and
//! interpreters the policy knows). Each is explained by `ybs policy
//! explain --json` under `allow: run_shell(*)` with a `deny` rule on
//! `run_shell`, and each the policy allows is then run by the real
//! `/bin/bash` in a scratch directory, under `env -i` with `PATH` holding
//! only shims: every program name is a shim that logs its argv and exits
//! 0, except the wrappers (`env`, `xargs`, `find`, `timeout`, `nice`,
//! `nohup`, `stdbuf`, `sh`, `bash`), whose shims log and then run the real
//! program — which finds only shims on `PATH`. `BASH_ENV` logs the
//! builtins that run code (`eval`, `source`, `.`, `exec`) the same way.
//! The generator writes bare program names and relative file names only,
//! so nothing outside the scratch directory is touched.
//!
//! A program that ran but is in none of the policy's parts, for a command
//! the policy allowed, is a failure: a `deny` rule on that program would
//! not have held. So is an argv that ran with other words than every part
//! the policy saw (an allow rule's glob was matched on the wrong text).
//!
//! The short pass (fixed seed, a few hundred commands) runs with the
//! suite; `YBS_DIFFERENTIAL=N` (and `YBS_DIFFERENTIAL_SEED`) makes a long
//! one: `sh tools/policy-differential 100000`.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::Ybs;

/// Programs whose shims only log.
const LEAVES: &[&str] = &[
    "touch", "ls", "cat", "grep", "wc", "head", "sort", "cut", "tr", "mkdir", "cp", "rm", "git",
    "cargo", "make", "curl", "python3", "node", "perl", "awk", "sed", "tee", "date", "id",
];

/// Programs whose shims log and then run the real one.
const WRAPPERS: &[&str] = &[
    "env", "xargs", "find", "timeout", "nice", "nohup", "stdbuf", "sh", "bash",
];

/// Programs the test's deny rules name: none may run for a command the
/// policy allowed.
const DENIED: &[&str] = &["touch", "curl"];

/// Values the variables of a command get when bash runs it.
const ADVERSARIAL: &[&str] = &[
    "touch",
    "curl x",
    "-exec touch {} ;",
    "--compress-program=touch",
    "-c touch x",
    "-delete",
    "",
    "a b",
    "a[$(touch x)]",
];

/// Builtins: no shim (bash runs them itself).
const BUILTINS: &[&str] = &["echo", "printf", "true", "false", "test", ":", "pwd"];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A word spelled one of the ways bash reads the same text.
fn quoted(rng: &mut Rng, text: &str) -> String {
    match rng.below(9) {
        0 => format!("'{text}'"),
        1 => format!("\"{text}\""),
        2 if text.len() > 1 => {
            let cut = 1 + rng.below(text.len() - 1);
            if text.is_char_boundary(cut) {
                format!("{}'{}'", &text[..cut], &text[cut..])
            } else {
                text.to_owned()
            }
        }
        3 if text.len() > 1 => {
            let cut = 1 + rng.below(text.len() - 1);
            if text.is_char_boundary(cut) {
                format!("\"{}\"{}", &text[..cut], &text[cut..])
            } else {
                text.to_owned()
            }
        }
        4 => text
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    format!("\\{c}")
                } else {
                    c.to_string()
                }
            })
            .collect(),
        5 => format!("$'{text}'"),
        6 if text.len() > 1 => format!("{}\"\"{}", &text[..1], &text[1..]),
        _ => text.to_owned(),
    }
}

fn program(rng: &mut Rng) -> String {
    let name = match rng.below(10) {
        0..=5 => rng.pick(LEAVES),
        6 | 7 => rng.pick(BUILTINS),
        _ => rng.pick(WRAPPERS),
    };
    if name == ":" || !rng.chance(30) {
        name.to_owned()
    } else {
        quoted(rng, name)
    }
}

fn argument(rng: &mut Rng) -> String {
    let plain = [
        "a",
        "b.txt",
        "-n",
        "--flag",
        "--opt=val",
        "x y",
        "-",
        "1",
        "f1",
        "seed",
        "#x",
        "a#b",
        "=",
        "k=v",
        "{}",
        "touch",
        "ls",
        "%s\\n",
    ];
    match rng.below(70) {
        0 => "$X".to_owned(),
        1 => "\"${Y}\"".to_owned(),
        2 => format!("$({})", simple(rng, 1)),
        3 => format!("`{}`", rng.pick(LEAVES)),
        4 => "$((1+2))".to_owned(),
        5 => "{a,b}".to_owned(),
        6 => "~".to_owned(),
        7 => "a\\ b".to_owned(),
        8 => format!("<({})", simple(rng, 1)),
        9 => "\\;".to_owned(),
        10 => "'$X'".to_owned(),
        11 => "\"a'b\"".to_owned(),
        12 => "'a\"b'".to_owned(),
        13 => "\\$X".to_owned(),
        14 => "\"\\\\\"".to_owned(),
        15 => "\"\\\"\"".to_owned(),
        16 => "\"\\$X\"".to_owned(),
        17 => "\"a\\b\"".to_owned(),
        18 => "'a'\\''b'".to_owned(),
        19 => "$\"x\"".to_owned(),
        20 => "a\\\nb".to_owned(),
        21 => "\"a\nb\"".to_owned(),
        22 => "a\tb".to_owned(),
        23 => "x==y".to_owned(),
        24 => "!".to_owned(),
        25 => "a}b".to_owned(),
        26 => "\\\n".to_owned(),
        27 => "'\\'".to_owned(),
        // Arithmetic on names evaluates their values (`a[$(…)]`).
        28 => "$((X+1))".to_owned(),
        29 => "${A[X]}".to_owned(),
        30 => "${!X}".to_owned(),
        31 => "$[X]".to_owned(),
        // Operands no option starts, behind a literal.
        32 => "\"./$X\"".to_owned(),
        33 => "\"src/${Y}.rs\"".to_owned(),
        _ => {
            let word = rng.pick(&plain);
            quoted(rng, word)
        }
    }
}

fn redirection(rng: &mut Rng) -> String {
    match rng.below(14) {
        12 => format!("< <({})", rng.pick(LEAVES)),
        13 => format!("> >({} x)", rng.pick(LEAVES)),
        0 => "> f1".to_owned(),
        1 => ">> f2".to_owned(),
        2 => "2>&1".to_owned(),
        3 => "< seed".to_owned(),
        4 => "&> f3".to_owned(),
        5 => "2> f4".to_owned(),
        6 => format!("<<< {}", argument(rng)),
        7 => ">f5".to_owned(),
        8 => "3> f6".to_owned(),
        9 => "<&-".to_owned(),
        10 => "> \"f 7\"".to_owned(),
        11 if rng.chance(50) => rng
            .pick(&[
                "{v}> f9", "&>> f10", ">&2", "2>&-", "10> f11", "1>&2", "0< seed", "<> f12",
            ])
            .to_owned(),
        _ => ">| f8".to_owned(),
    }
}

/// `[assignments] program args [redirections]`, or a wrapper form.
fn simple(rng: &mut Rng, depth: usize) -> String {
    if depth < 3 && rng.chance(12) {
        return wrapped(rng, depth);
    }
    let mut words = Vec::new();
    if rng.chance(10) {
        words.push(rng.pick(&["A=1", "B='x y'", "C=\"$X\"", "D="]).to_owned());
    }
    words.push(program(rng));
    for _ in 0..rng.below(4) {
        words.push(argument(rng));
    }
    if rng.chance(25) {
        words.push(redirection(rng));
    }
    words.join(" ")
}

fn inner(rng: &mut Rng, depth: usize) -> String {
    let leaf = rng.pick(LEAVES);
    if depth < 2 && rng.chance(30) {
        simple(rng, depth + 1)
    } else {
        format!("{leaf} a")
    }
}

/// The wrappers and interpreters the policy unwraps.
fn wrapped(rng: &mut Rng, depth: usize) -> String {
    let leaf = rng.pick(LEAVES);
    match rng.below(22) {
        0 => format!("env A=1 {}", inner(rng, depth)),
        1 => format!("env -i {}", inner(rng, depth)),
        2 => format!("env -- {}", inner(rng, depth)),
        3 => format!("xargs {leaf} a"),
        4 => format!("find . -maxdepth 0 -exec {leaf} {{}} \\;"),
        5 => format!("find . -maxdepth 0 -execdir {leaf} {{}} +"),
        6 => format!("timeout 5 {}", inner(rng, depth)),
        7 => format!("nice -n 1 {}", inner(rng, depth)),
        8 => format!("nohup {}", inner(rng, depth)),
        9 => format!("stdbuf -o0 {}", inner(rng, depth)),
        10 => format!("sh -c '{}'", inner(rng, depth)),
        11 => format!("bash -c \"{}\"", inner(rng, depth)),
        12 => format!("command {}", inner(rng, depth)),
        13 => format!("exec {}", inner(rng, depth)),
        14 => format!("eval '{}'", inner(rng, depth)),
        15 => format!("time {}", inner(rng, depth)),
        16 => format!("builtin eval '{leaf} a'"),
        17 => format!("! {}", inner(rng, depth)),
        18 => format!("env -S '{leaf} a'"),
        19 => format!("{leaf} a | xargs -I{{}} {leaf} {{}}"),
        20 => format!("bash <<< '{leaf} a'"),
        21 if rng.chance(50) => rng
            .pick(&[
                "coproc touch a",
                "function f { touch a; }; f",
                "[[ -n a ]] && touch a",
                "(( 1 )) && touch a",
                "select x in a; do touch a; done",
                "case a in a) touch a;; esac",
                "until true; do touch a; done",
                "time -p touch a",
                "exec -a x touch a",
                "declare -f x; touch a",
            ])
            .to_owned(),
        _ => format!(". ./{leaf}"),
    }
}

fn pipeline(rng: &mut Rng) -> String {
    let mut text = simple(rng, 0);
    while rng.chance(20) {
        text.push_str(rng.pick(&[" | ", " |& ", "|"]));
        text.push_str(&simple(rng, 0));
    }
    text
}

fn compound(rng: &mut Rng) -> String {
    match rng.below(40) {
        0 => format!("( {} )", pipeline(rng)),
        1 => format!("{{ {}; }}", pipeline(rng)),
        2 => format!("if {}; then {}; fi", pipeline(rng), pipeline(rng)),
        3 => format!("for i in a b; do {}; done", pipeline(rng)),
        4 => format!("{} <<EOF\nline $X\nEOF", simple(rng, 0)),
        5 => format!("{} <<'EOF'\nline\nEOF", simple(rng, 0)),
        6 => format!("{} # {}", pipeline(rng), rng.pick(LEAVES)),
        7 => format!("a=({} {}); {}", argument(rng), argument(rng), pipeline(rng)),
        8 => format!("for (( i = 0; i < 1; i++ )); do {}; done", pipeline(rng)),
        9 => format!("time ( {} )", pipeline(rng)),
        _ => pipeline(rng),
    }
}

/// One command line.
fn command(rng: &mut Rng) -> String {
    let mut text = compound(rng);
    while rng.chance(30) {
        text.push_str(rng.pick(&["; ", " && ", " || ", " & ", "\n", ";"]));
        text.push_str(&compound(rng));
    }
    text
}

/// The scratch directory: shims, the `BASH_ENV` file, the workdir.
struct Scratch {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    work: PathBuf,
    log: PathBuf,
    bash_env: PathBuf,
    runs: std::cell::Cell<u64>,
}

fn which(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let log = dir.path().join("log");
        // A record: the argument count, the program name, the arguments,
        // each ended by NUL.
        let record = "printf '%s\\0' \"$#\" \"${0##*/}\" \"$@\" >> \"$YBS_DIFF_LOG\"";
        for name in LEAVES.iter().chain(WRAPPERS) {
            let tail = if WRAPPERS.contains(name) {
                let real = which(name).unwrap_or_else(|| panic!("no real {name}"));
                format!("exec {} \"$@\"\n", real.display())
            } else {
                "exit 0\n".to_owned()
            };
            let path = bin.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{record}\n{tail}")).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        let bash_env = dir.path().join("bash_env");
        let mut functions = String::new();
        for builtin in ["eval", "source", "exec"] {
            functions.push_str(&format!(
                "{builtin}() {{ printf '%s\\0' \"$#\" {builtin} \"$@\" >> \"$YBS_DIFF_LOG\"; builtin {builtin} \"$@\"; }}\n"
            ));
        }
        std::fs::write(&bash_env, functions).unwrap();
        std::fs::write(work.join("seed"), "seed\n").unwrap();
        Self {
            _dir: dir,
            bin,
            work,
            log,
            bash_env,
            runs: std::cell::Cell::new(0),
        }
    }

    /// Runs `command` under bash; every argv that ran. Each run logs to
    /// a file of its own, so a program left running in the background by
    /// one command is never counted for the next; reading bash's output to
    /// its end waits for whatever still holds it.
    fn run(&self, command: &str) -> Vec<Vec<String>> {
        let runs = self.runs.get() + 1;
        self.runs.set(runs);
        let log = self.log.with_extension(runs.to_string());
        // The unknowns get adversarial values: option-shaped and
        // program-shaped, naming the denied programs (issue 33 item 7).
        let value = |offset: usize| ADVERSARIAL[(runs as usize + offset) % ADVERSARIAL.len()];
        let output = Command::new("/usr/bin/env")
            .arg("-i")
            .arg(format!("X={}", value(0)))
            .arg(format!("Y={}", value(3)))
            .arg(format!("PATH={}", self.bin.display()))
            .arg(format!("HOME={}", self.work.display()))
            .arg(format!("BASH_ENV={}", self.bash_env.display()))
            .arg(format!("YBS_DIFF_LOG={}", log.display()))
            .arg("/bin/bash")
            .arg("-c")
            .arg(command)
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .output();
        assert!(output.is_ok(), "bash did not start");
        let log = std::fs::read(&log).unwrap_or_default();
        let mut fields = log
            .split(|b| *b == 0)
            .map(|f| String::from_utf8_lossy(f).into_owned());
        let mut ran = Vec::new();
        while let Some(count) = fields.next() {
            let Ok(count) = count.parse::<usize>() else {
                break;
            };
            let argv: Vec<String> = fields.by_ref().take(count + 1).collect();
            ran.push(argv);
        }
        ran
    }
}

/// A config that turns the sandbox's exec guard off: the policy's parser
/// decides alone, as it does on a kernel without the guard.
pub const PARSER_ALONE: &str = "parser-alone.json";
pub const PARSER_ALONE_CONFIG: &str = r#"{"safety": {"sandbox_exec_guard": false}}"#;

/// The policy's explanation of each command, in one `ybs` run.
fn explain_all(ybs: &Ybs, commands: &[String]) -> Vec<Value> {
    let mut child = ybs
        .command()
        .args([
            "policy",
            "explain",
            "--json",
            "--sandbox",
            "full",
            "--config",
            PARSER_ALONE,
            "--task",
            "t.yaml",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input: String = commands
        .iter()
        .map(|c| format!("{}\n", Value::String(format!("run_shell({c})"))))
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let explained: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(explained.len(), commands.len());
    assert!(
        explained
            .iter()
            .all(|e| e["sandbox"]["exec_guard"] == false),
        "the parser must decide alone"
    );
    explained
}

/// What one pass found.
#[derive(Default)]
struct Outcome {
    tried: usize,
    allowed: usize,
    /// (command, program that ran outside the policy's picture).
    findings: Vec<(String, String)>,
    /// (command, an argv that ran whose program is in the picture but
    /// whose words differ from every part's).
    argv_differs: Vec<(String, Vec<String>)>,
}

fn pass(seed: u64, count: usize) -> Outcome {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: x\npolicy:\n  allow: [\"run_shell(*)\"]\n  deny: [\"run_shell(touch*)\", \"run_shell(curl*)\"]\n",
    );
    // The parser alone: bash runs the commands here without the sandbox,
    // so its exec guard (docs/policy.md) must not decide for it.
    ybs.file(PARSER_ALONE, PARSER_ALONE_CONFIG);
    let scratch = Scratch::new();
    let mut rng = Rng(seed | 1);
    let mut outcome = Outcome::default();
    // Batches keep the explain input and memory bounded.
    let mut left = count;
    while left > 0 {
        let batch = left.min(5000);
        left -= batch;
        let commands: Vec<String> = (0..batch).map(|_| command(&mut rng)).collect();
        let explained = explain_all(&ybs, &commands);
        for (command, explanation) in commands.iter().zip(&explained) {
            outcome.tried += 1;
            if explanation["decision"]["verdict"] != "allow" {
                continue;
            }
            outcome.allowed += 1;
            let picture: BTreeSet<String> = explanation["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|part| part["argv"][0].as_str())
                .map(|word| word.rsplit('/').next().unwrap_or(word).to_owned())
                .collect();
            let argvs: Vec<Vec<String>> = explanation["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|part| {
                    let mut argv: Vec<String> = part["argv"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|w| w.as_str().map(str::to_owned))
                        .collect();
                    // xargs appends its input: words the policy cannot see.
                    if part["via"] == "xargs" {
                        argv.push("$XARGS_INPUT".to_owned());
                    }
                    if let Some(first) = argv.first_mut() {
                        *first = first.rsplit('/').next().unwrap_or(first).to_owned();
                    }
                    argv
                })
                .collect();
            // Under the full sandbox a word naming the home is no
            // hazard: `~` stands for it, as bash expands it.
            let home = scratch.work.display().to_string();
            let expanded: Vec<Vec<String>> = argvs
                .iter()
                .map(|argv| {
                    argv.iter()
                        .map(|word| match word.strip_prefix('~') {
                            Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                                format!("{home}{rest}")
                            }
                            _ => word.clone(),
                        })
                        .collect()
                })
                .collect();
            for argv in scratch.run(command) {
                let name = argv.first().cloned().unwrap_or_default();
                if !picture.contains(&name) || DENIED.contains(&name.as_str()) {
                    outcome.findings.push((command.clone(), name));
                } else if !argvs.contains(&argv)
                    && !expanded.contains(&argv)
                    && !expanded.iter().any(|part| unknowns_match(part, &argv))
                {
                    outcome.argv_differs.push((command.clone(), argv));
                }
            }
        }
    }
    outcome
}

/// True if and only if `ran` may be what bash made of the policy's
/// `part`: its literal words as written, each word the policy could not
/// see (a variable, a substitution, a glob, `{}`) standing for any number
/// of words.
fn unknowns_match(part: &[String], ran: &[String]) -> bool {
    let unknown = |word: &str| {
        word.contains(['$', '`', '*', '?', '[', '{', '~'])
            || word.starts_with("<(")
            || word.starts_with(">(")
    };
    // Positions reachable in `ran` after each word of `part`.
    let mut reach = vec![false; ran.len() + 1];
    reach[0] = true;
    for word in part {
        let mut next = vec![false; ran.len() + 1];
        for at in (0..=ran.len()).filter(|&at| reach[at]) {
            if unknown(word) {
                for reached in &mut next[at..] {
                    *reached = true;
                }
            } else if ran.get(at) == Some(word) {
                next[at + 1] = true;
            }
        }
        reach = next;
    }
    reach[ran.len()]
}

fn report(outcome: &Outcome) -> String {
    let mut text = format!(
        "{} commands tried, {} allowed and run under bash, {} findings",
        outcome.tried,
        outcome.allowed,
        outcome.findings.len()
    );
    for (command, program) in outcome.findings.iter().take(20) {
        text.push_str(&format!(
            "\n  `{program}` ran outside the picture, or is denied, for: {command:?}"
        ));
    }
    text.push_str(&format!(
        "\n{} argvs ran with other words than the policy saw",
        outcome.argv_differs.len()
    ));
    for (command, argv) in outcome.argv_differs.iter().take(20) {
        text.push_str(&format!("\n  {argv:?} ran for: {command:?}"));
    }
    text
}

/// The bounded pass with the suite: a fixed seed, well under a minute.
/// `YBS_DIFFERENTIAL=N` runs N commands instead (the long pass).
#[test]
fn what_bash_runs_is_in_the_policys_picture() {
    if which("bash").is_none() || !Path::new("/bin/bash").is_file() {
        panic!("the differential test needs /bin/bash");
    }
    let count = std::env::var("YBS_DIFFERENTIAL")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(400);
    let seed = std::env::var("YBS_DIFFERENTIAL_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(27);
    let outcome = pass(seed, count);
    eprintln!("{}", report(&outcome));
    assert!(
        outcome.findings.is_empty() && outcome.argv_differs.is_empty(),
        "{}",
        report(&outcome)
    );
    assert!(
        outcome.allowed * 5 >= outcome.tried,
        "too few allowed commands to test anything: {}",
        report(&outcome)
    );
}

/// Findings of earlier long passes, kept: each was allowed while bash ran
/// a program the policy did not see (or must stay refused).
#[test]
fn the_grammar_is_exercised_against_real_bash() {
    // The harness itself: a plain allowed command runs its shim, and the
    // log records the argv bash passed, quotes removed.
    let scratch = Scratch::new();
    let ran = scratch.run("t'ou'ch \"a b\" c && env A=1 ls -l");
    assert_eq!(
        ran,
        vec![
            vec!["touch".to_owned(), "a b".to_owned(), "c".to_owned()],
            vec![
                "env".to_owned(),
                "A=1".to_owned(),
                "ls".to_owned(),
                "-l".to_owned()
            ],
            vec!["ls".to_owned(), "-l".to_owned()],
        ]
    );
    let ran = scratch.run("eval 'cat x'");
    assert_eq!(ran[0][0], "eval");
    assert_eq!(ran[1], vec!["cat".to_owned(), "x".to_owned()]);
}
