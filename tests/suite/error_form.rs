//! Every error has the form the README promises (issue 40, mismatch 8):
//! one line, `FILE:LINE:COL: what was wrong` where the error has a place
//! in a file (`FILE: what` where it is about the file as a whole, `error:
//! what` where no file is involved), then `  hint: …`. Each bad input
//! below goes through the real binary.

use crate::support::Ybs;

/// One bad input: the files it writes, the command, and how the first
/// error line must start.
struct Case {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    starts: &'static str,
}

const MODEL: [&str; 4] = ["--provider", "ollama", "--model", "m"];

const CASES: &[Case] = &[
    Case {
        name: "bad YAML",
        files: &[("t.yaml", "prompt: [\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:1:9: invalid YAML: ",
    },
    Case {
        name: "unknown field, no close match",
        files: &[("t.yaml", "prompt: x\nzzzzz: 1\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:2:1: unknown field `zzzzz`",
    },
    Case {
        name: "unknown field, a typo",
        files: &[("t.yaml", "prompt: x\nlimts: {}\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:2:1: unknown field `limts`",
    },
    Case {
        name: "wrong type",
        files: &[("t.yaml", "prompt: x\nlimits: {max_iterations: abc}\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:2:26: invalid `max_iterations`",
    },
    Case {
        name: "an empty task file",
        files: &[("t.yaml", "")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:1:1: the task file is empty",
    },
    Case {
        name: "duplicate id",
        files: &[
            ("a.yaml", "id: same\nprompt: x\n"),
            ("b.yaml", "id: same\nprompt: y\n"),
        ],
        args: &["validate", "a.yaml", "b.yaml"],
        env: &[],
        starts: "b.yaml:1:1: duplicate task id `same`",
    },
    Case {
        name: "a rule naming no tool",
        files: &[("t.yaml", "prompt: x\npolicy:\n  allow: [nosuchtool]\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:3:11: `allow` rule `nosuchtool`",
    },
    Case {
        name: "a missing workdir",
        files: &[("t.yaml", "prompt: x\nworkdir: does/not/exist\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:2:10: task `t`: workdir ",
    },
    Case {
        name: "a missing required tool",
        files: &[(
            "t.yaml",
            "prompt: x\ntools:\n  external: [{name: nosuchtool, required: true}]\n",
        )],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml:3:14: task `t`: external tool `nosuchtool`",
    },
    Case {
        name: "no model",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["validate", "t.yaml"],
        env: &[],
        starts: "t.yaml: task `t`: no model to run with",
    },
    Case {
        name: "a missing task file",
        files: &[],
        args: &["run", "nosuch.yaml"],
        env: &[],
        starts: "nosuch.yaml: no such file or directory",
    },
    Case {
        name: "a bad config file",
        files: &[
            ("c.json", "{\"llm\": {\"zzzzz\": 1}}\n"),
            ("t.yaml", "prompt: x\n"),
        ],
        args: &["validate", "--config", "c.json", "t.yaml"],
        env: &[],
        starts: "c.json:1:10: unknown field `zzzzz`",
    },
    Case {
        name: "a missing config file",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["validate", "--config", "nosuch.json", "t.yaml"],
        env: &[],
        starts: "nosuch.json: config file not found",
    },
    Case {
        name: "a bad flag value",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["run", "--jobs", "many", "t.yaml"],
        env: &[],
        starts: "error: invalid value 'many' for '--jobs <N>'",
    },
    Case {
        name: "a flag that does not exist",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["run", "--no-such-flag", "t.yaml"],
        env: &[],
        starts: "error: unexpected argument '--no-such-flag'",
    },
    Case {
        name: "a bad environment variable",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["validate", "t.yaml"],
        env: &[("YBS_GIT_AUTHOR", "nobody")],
        // The value is not repeated: it may be a secret set by mistake.
        starts: "error: invalid value `[REDACTED]` for environment variable YBS_GIT_AUTHOR",
    },
    Case {
        name: "a bad --provider (a flag ybs checks)",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["validate", "--provider", "foo", "--model", "m", "t.yaml"],
        env: &[],
        starts: "error: invalid value `foo` for `--provider`",
    },
    Case {
        name: "a bad duration in the environment",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["validate", "t.yaml"],
        env: &[("YBS_TIMEOUT", "soon")],
        starts: "error: invalid value `soon` for environment variable YBS_TIMEOUT",
    },
    Case {
        name: "a --filter no task matches",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["run", "--filter", "zz*", "t.yaml"],
        env: &[],
        starts: "error: no task matches the given paths and --filter",
    },
    Case {
        name: "a --filter that is no glob",
        files: &[("t.yaml", "prompt: x\n")],
        args: &["run", "--filter", "zz[", "t.yaml"],
        env: &[],
        starts: "error: invalid --filter `zz[`",
    },
    Case {
        name: "a bad durations file",
        files: &[
            (
                "d.json",
                "{\"version\": 1,\n \"tasks\": {\"t\": \"slow\"}}\n",
            ),
            ("t.yaml", "prompt: x\n"),
        ],
        args: &[
            "run",
            "--shard",
            "1/2",
            "--shard-by",
            "durations",
            "--durations",
            "d.json",
            "t.yaml",
        ],
        env: &[],
        starts: "d.json:2:",
    },
    Case {
        name: "a missing durations file",
        files: &[("t.yaml", "prompt: x\n")],
        args: &[
            "run",
            "--shard",
            "1/2",
            "--shard-by",
            "durations",
            "--durations",
            "nosuch.json",
            "t.yaml",
        ],
        env: &[],
        starts: "nosuch.json: cannot read the durations file",
    },
    Case {
        name: "a bad policy file for policy explain",
        files: &[("p.yaml", "allow: [read_file\n")],
        args: &["policy", "explain", "--policy", "p.yaml", "read_file"],
        env: &[],
        starts: "p.yaml:1:",
    },
    Case {
        name: "a wrong type in a policy file",
        files: &[("p.yaml", "allow: [read_file]\nask: 3\n")],
        args: &["policy", "explain", "--policy", "p.yaml", "read_file"],
        env: &[],
        starts: "p.yaml:2:6: ",
    },
    Case {
        name: "a missing policy file",
        files: &[],
        args: &["policy", "explain", "--policy", "nosuch.yaml", "read_file"],
        env: &[],
        starts: "nosuch.yaml: policy file not found",
    },
];

#[test]
fn every_error_names_its_place_and_gives_a_hint() {
    let mut failures = Vec::new();
    for case in CASES {
        let mut ybs = Ybs::new();
        for (key, value) in case.env {
            ybs = ybs.env(key, value);
        }
        for (path, text) in case.files {
            ybs.file(path, text);
        }
        let mut args: Vec<&str> = case.args.to_vec();
        // A model for what needs one, except where its absence is the error.
        if args[0] != "policy" && case.name != "no model" && !case.name.contains("flag") {
            args.extend(MODEL);
        }
        let run = ybs.run(&args);
        let lines: Vec<&str> = run.stderr.lines().collect();
        let first = lines.first().copied().unwrap_or_default();
        let hint = lines.get(1).copied().unwrap_or_default();
        // The hint follows the error line (a usage line may come between).
        let hinted = hint.starts_with("  hint: ")
            || (hint.starts_with("Usage: ")
                && lines
                    .get(2)
                    .is_some_and(|line| line.starts_with("  hint: ")));
        if run.code != 2 || !first.starts_with(case.starts) || !hinted {
            failures.push(format!(
                "{}: `ybs {}`: exit {}, expected `{}…` then `  hint: …`:\n{}",
                case.name,
                args.join(" "),
                run.code,
                case.starts,
                run.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `ybs validate`'s last line counts every error it printed: the load's
/// (a file that does not parse, a duplicate id) and the preflight's (a
/// workdir, a required tool, the model) alike (issue 40).
#[test]
fn validate_counts_every_error_it_printed() {
    let ybs = Ybs::new();
    ybs.file("tasks/a.yaml", "id: same\nprompt: x\n");
    ybs.file("tasks/b.yaml", "id: same\nprompt: y\n");
    ybs.file("tasks/c.yaml", "prompt: [\n");
    ybs.file("tasks/d.yaml", "prompt: x\nworkdir: does/not/exist\n");
    ybs.file(
        "tasks/e.yaml",
        "prompt: x\ntools:\n  external: [{name: nosuchtool, required: true}]\n",
    );
    let run = ybs.run(["validate", "tasks/"]);
    run.expect_code(2);
    let errors = run
        .stderr
        .lines()
        .filter(|line| line.starts_with("tasks/"))
        .count();
    // Two load errors (c's YAML, b's duplicate id); no model for a, b, d
    // and e; d's workdir; e's tool.
    assert_eq!(errors, 8, "{}", run.stderr);
    let last = run.stderr.lines().last().unwrap();
    assert_eq!(last, "8 errors found", "{}", run.stderr);
    let counts = run
        .stderr
        .lines()
        .filter(|line| line.ends_with(" found") && line.starts_with(char::is_numeric))
        .count();
    assert_eq!(counts, 1, "one count: {}", run.stderr);
    // With only preflight errors, the count is still there, and right.
    let run = ybs.run(["validate", "tasks/d.yaml", "tasks/e.yaml"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr.lines().last(),
        Some("4 errors found"),
        "{}",
        run.stderr
    );
    let run = ybs.run(["validate", "tasks/d.yaml"].iter().chain(&MODEL));
    run.expect_code(2);
    assert_eq!(
        run.stderr.lines().last(),
        Some("1 error found"),
        "{}",
        run.stderr
    );
}
