//! What the exec guard matches the deny globs against: the views of one
//! `execve` (docs/sandbox.md, "The exec guard").
//!
//! The kernel runs more than the file named: a `#!` script runs its
//! interpreter (up to four levels), the dynamic loader run as a program
//! loads the program named in its arguments, and a copy of a program
//! runs that program under another name. Each is a view here:
//!
//! - the argv as given, and with its first word's directory stripped;
//! - the name of the file executed, then `argv[1..]`;
//! - a denied program's name, then `argv[1..]`, when the file executed
//!   is that program: the same file (device and inode) or a copy (the
//!   same size and bytes);
//! - for a script, the same views of the interpreter with the argv the
//!   kernel gives it (`INTERP [ARG] SCRIPT argv[1..]`);
//! - for the loader (`ld-linux*.so*`, `ld.so`, `ld-musl*`), the same
//!   views of the program it is given, after its options.
//!
//! Files are opened through a function the caller gives, which maps a
//! path as the confined process sees it to one the supervisor can open
//! (`/proc/PID/root/…`, `/proc/PID/cwd/…`).

use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// A program a deny rule names by its first word, and its file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeniedProgram {
    /// The name the rule gives it (`curl`, `git`).
    pub name: String,
    /// Its file, as the confined programs see it (canonical, absolute).
    pub path: PathBuf,
}

/// One exec, as the supervisor read it from the caller's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// Where the supervisor opens the file executed.
    pub file: PathBuf,
    /// The path as the caller gave it (empty for `AT_EMPTY_PATH`).
    pub path: String,
    pub argv: Vec<String>,
}

/// How deep `#!` interpreters nest before the kernel gives up (its
/// `BINPRM_MAX_RECURSION` is 4).
const MAX_DEPTH: usize = 5;

/// The loader's options that take a value (glibc's `ld.so --help`).
const LOADER_VALUED: &[&str] = &[
    "--library-path",
    "--inhibit-rpath",
    "--audit",
    "--preload",
    "--argv0",
    "--glibc-hwcaps-prepend",
    "--glibc-hwcaps-mask",
];

/// Every view of `exec`, each a command line joined by single spaces.
/// `open` maps a path as the caller sees it to one the supervisor can
/// open; `denied` are the programs the rules name.
pub fn views(exec: &Exec, denied: &[DeniedProgram], open: &dyn Fn(&str) -> PathBuf) -> Vec<String> {
    let mut views: Vec<String> = Vec::new();
    let mut add = |words: &[&str]| {
        let line = words.join(" ");
        if !line.trim().is_empty() && !views.contains(&line) {
            views.push(line);
        }
    };
    let argv: Vec<&str> = exec.argv.iter().map(String::as_str).collect();
    let rest: &[&str] = argv.get(1..).unwrap_or_default();
    if !argv.is_empty() {
        add(&argv);
        add(&[&[basename(argv[0])], rest].concat());
    }
    // What runs: (file to open, its path as given, the argv after its
    // name). Followed through scripts and the loader.
    let mut file = exec.file.clone();
    let mut path = exec.path.clone();
    let mut args: Vec<String> = rest.iter().map(|s| (*s).to_owned()).collect();
    for _ in 0..MAX_DEPTH {
        let tail: Vec<&str> = args.iter().map(String::as_str).collect();
        if !path.is_empty() {
            add(&[&[basename(&path)], tail.as_slice()].concat());
        }
        if let Some(name) = same_program(&file, denied, open) {
            add(&[&[name], tail.as_slice()].concat());
        }
        if is_loader(&path, &file) {
            let Some(at) = loader_program(&args) else {
                break;
            };
            let program = args[at].clone();
            file = open(&program);
            path = program;
            args = args[at + 1..].to_vec();
            continue;
        }
        let Some((interpreter, argument)) = shebang(&file) else {
            break;
        };
        let mut next = Vec::with_capacity(args.len() + 2);
        next.extend(argument);
        next.push(path.clone());
        next.append(&mut args);
        file = open(&interpreter);
        path = interpreter;
        args = next;
    }
    views
}

/// The last component of a path (`/usr/bin/curl` → `curl`).
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The name of the denied program `file` is: the same file, or a copy
/// of the same size and bytes.
fn same_program<'a>(
    file: &Path,
    denied: &'a [DeniedProgram],
    open: &dyn Fn(&str) -> PathBuf,
) -> Option<&'a str> {
    let meta = std::fs::metadata(file).ok()?;
    let mut same_size = Vec::new();
    for program in denied {
        let Some(path) = program.path.to_str() else {
            continue;
        };
        let Ok(theirs) = std::fs::metadata(open(path)) else {
            continue;
        };
        if (theirs.dev(), theirs.ino()) == (meta.dev(), meta.ino()) {
            return Some(&program.name);
        }
        if theirs.len() == meta.len() {
            same_size.push((program, open(path)));
        }
    }
    let bytes = if same_size.is_empty() {
        return None;
    } else {
        std::fs::read(file).ok()?
    };
    same_size
        .into_iter()
        .find(|(_, theirs)| std::fs::read(theirs).is_ok_and(|b| b == bytes))
        .map(|(program, _)| program.name.as_str())
}

/// True if and only if the file executed is the dynamic loader run as a
/// program: by its name as given or as resolved.
fn is_loader(path: &str, file: &Path) -> bool {
    let named = |name: &str| {
        name.starts_with("ld-linux")
            || name.starts_with("ld.so")
            || name.starts_with("ld-musl")
            || name.starts_with("ld64.so")
    };
    named(basename(path))
        || std::fs::canonicalize(file)
            .ok()
            .and_then(|real| real.file_name().and_then(|n| n.to_str()).map(named))
            .unwrap_or(false)
}

/// The index in `args` of the program the loader is given, after its
/// options; `None` when there is none (`--help`, `--list-tunables`).
fn loader_program(args: &[String]) -> Option<usize> {
    let mut index = 0;
    while let Some(word) = args.get(index) {
        if word == "--" {
            return (index + 1 < args.len()).then_some(index + 1);
        }
        if !word.starts_with("--") {
            return Some(index);
        }
        index += if LOADER_VALUED.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    None
}

/// The interpreter and its optional argument of a `#!` script, as the
/// kernel reads them: the first line, at most 256 bytes, split at the
/// first blank after the interpreter.
fn shebang(file: &Path) -> Option<(String, Option<String>)> {
    let mut head = [0u8; 256];
    let mut read = 0;
    let mut handle = std::fs::File::open(file).ok()?;
    while read < head.len() {
        match handle.read(&mut head[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    let head = head.get(..read)?;
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
    let (interpreter, argument) = match line.find([' ', '\t']) {
        Some(at) => {
            let argument = line[at..].trim_matches(|c| c == ' ' || c == '\t');
            (
                &line[..at],
                (!argument.is_empty()).then(|| argument.to_owned()),
            )
        }
        None => (line, None),
    };
    (!interpreter.is_empty()).then(|| (interpreter.to_owned(), argument))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn exec(dir: &Path, path: &str, argv: &[&str]) -> Exec {
        Exec {
            file: resolve(dir, path),
            path: path.to_owned(),
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn resolve(dir: &Path, path: &str) -> PathBuf {
        if path.starts_with('/') {
            PathBuf::from(path)
        } else {
            dir.join(path)
        }
    }

    /// `/usr/bin/touch`, canonical, and the list naming it.
    fn touch_denied() -> (PathBuf, Vec<DeniedProgram>) {
        let touch = std::fs::canonicalize("/usr/bin/touch").unwrap();
        let denied = vec![DeniedProgram {
            name: "touch".to_owned(),
            path: touch.clone(),
        }];
        (touch, denied)
    }

    fn script(dir: &Path, name: &str, text: &str) {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn argv_names_and_copies_are_views() {
        let dir = tempfile::tempdir().unwrap();
        let (touch, denied) = touch_denied();
        let open = |p: &str| resolve(dir.path(), p);
        let plain = views(
            &exec(dir.path(), "/usr/bin/touch", &["/usr/bin/touch", "-c", "x"]),
            &denied,
            &open,
        );
        assert!(
            plain.contains(&"/usr/bin/touch -c x".to_owned()),
            "{plain:?}"
        );
        assert!(plain.contains(&"touch -c x".to_owned()), "{plain:?}");
        // A copy under another name, argv[0] lying: found by its bytes.
        std::fs::copy(&touch, dir.path().join("t")).unwrap();
        let copy = views(&exec(dir.path(), "./t", &["ls", "x"]), &denied, &open);
        assert!(copy.contains(&"touch x".to_owned()), "{copy:?}");
        // A hard link: the same file.
        if std::fs::hard_link(dir.path().join("t"), dir.path().join("h")).is_ok() {
            let linked = views(&exec(dir.path(), "./h", &["h"]), &denied, &open);
            assert!(linked.contains(&"touch".to_owned()), "{linked:?}");
        }
        // A different program is not the denied one.
        let other = views(&exec(dir.path(), "/bin/ls", &["ls", "x"]), &denied, &open);
        assert_eq!(other, vec!["ls x".to_owned()]);
    }

    #[test]
    fn scripts_run_their_interpreter_and_the_loader_its_program() {
        let dir = tempfile::tempdir().unwrap();
        let (_, denied) = touch_denied();
        let open = |p: &str| resolve(dir.path(), p);
        script(dir.path(), "s", "#!/usr/bin/touch -c\nrest\n");
        let seen = views(&exec(dir.path(), "./s", &["./s", "y"]), &denied, &open);
        assert!(seen.contains(&"touch -c ./s y".to_owned()), "{seen:?}");
        // Two levels: a script whose interpreter is a script.
        script(
            dir.path(),
            "outer",
            &format!("#!{}/s\n", dir.path().display()),
        );
        let nested = views(&exec(dir.path(), "./outer", &["outer"]), &denied, &open);
        assert!(
            nested.iter().any(|v| v.starts_with("touch -c ")),
            "{nested:?}"
        );
        // The loader run as a program, with options.
        let seen = views(
            &exec(
                dir.path(),
                "/lib64/ld-linux-x86-64.so.2",
                &["ld", "--library-path", "/lib", "/usr/bin/touch", "z"],
            ),
            &denied,
            &open,
        );
        assert!(seen.contains(&"touch z".to_owned()), "{seen:?}");
        assert_eq!(loader_program(&["--help".to_owned()]), None);
        assert_eq!(loader_program(&["--".to_owned(), "p".to_owned()]), Some(1));
    }

    #[test]
    fn a_shebang_line_is_read_like_the_kernel_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        for (text, want) in [
            ("#!/bin/sh\n", Some(("/bin/sh", None))),
            (
                "#! /usr/bin/env  python3 -u \n",
                Some(("/usr/bin/env", Some("python3 -u"))),
            ),
            ("#!/bin/bash\t-e\r\n", Some(("/bin/bash", Some("-e")))),
            ("#!\n", None),
            ("\x7fELF", None),
        ] {
            std::fs::write(dir.path().join("f"), text).unwrap();
            let got = shebang(&dir.path().join("f"));
            let got = got.as_ref().map(|(i, a)| (i.as_str(), a.as_deref()));
            assert_eq!(got, want, "{text:?}");
        }
    }
}
