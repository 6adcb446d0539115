use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use nix::sys::stat::Mode;

use super::*;
use crate::tools::testing::{Fixture, model_error};

#[test]
fn resolves_inside_paths_to_display_form() {
    let fx = Fixture::new();
    fx.file("src/a.txt", "a");
    let resolved = resolve(&fx.ctx, "src/a.txt", Access::Read).unwrap();
    assert_eq!(resolved.display, "src/a.txt");
    assert_eq!(resolved.kind, Some(Kind::File));
    assert_eq!(resolved.abs, fx.work().join("src/a.txt"));
    let resolved = resolve(&fx.ctx, "./src/../src/./a.txt", Access::Read).unwrap();
    assert_eq!(resolved.display, "src/a.txt");
    let absolute = fx.work().join("src/a.txt");
    let resolved = resolve(&fx.ctx, absolute.to_str().unwrap(), Access::Read).unwrap();
    assert_eq!(resolved.display, "src/a.txt");
    let resolved = resolve(&fx.ctx, ".", Access::Read).unwrap();
    assert_eq!(
        (resolved.display.as_str(), resolved.kind),
        (".", Some(Kind::Dir))
    );
    let resolved = resolve(&fx.ctx, "new/dir/file.txt", Access::Write).unwrap();
    assert_eq!(
        (resolved.display.as_str(), resolved.kind),
        ("new/dir/file.txt", None)
    );
}

#[test]
fn dot_dot_escape_is_refused() {
    let fx = Fixture::new();
    let message = model_error(resolve(&fx.ctx, "../outside/secret.txt", Access::Read));
    assert_eq!(
        message,
        "`../outside/secret.txt` resolves outside the working directory"
    );
    model_error(resolve(&fx.ctx, "src/../../x", Access::Write));
    model_error(resolve(&fx.ctx, "..", Access::Read));
    let message = model_error(resolve(&fx.ctx, "~/.ssh/id_rsa", Access::Read));
    assert!(message.contains("`~` is not expanded"), "{message}");
}

#[test]
fn absolute_paths_outside_and_string_prefixes_are_refused() {
    let fx = Fixture::new();
    model_error(resolve(&fx.ctx, "/etc/passwd", Access::Read));
    // `work2` starts with the string `work` but is not inside it.
    std::fs::create_dir_all(fx.root.join("work2")).unwrap();
    std::fs::write(fx.root.join("work2/f"), "x").unwrap();
    let sibling = fx.root.join("work2/f");
    let message = model_error(resolve(&fx.ctx, sibling.to_str().unwrap(), Access::Read));
    assert!(message.contains("resolves outside"), "{message}");
}

#[test]
fn symlinks_leaving_the_roots_are_refused_for_read_and_write() {
    let fx = Fixture::new();
    fx.symlink(fx.root.join("outside/secret.txt"), "abs_link");
    fx.symlink("../outside/secret.txt", "rel_link");
    for link in ["abs_link", "rel_link"] {
        let message = model_error(resolve(&fx.ctx, link, Access::Read));
        assert!(message.contains("resolves outside"), "{message}");
        assert!(
            message.contains(&format!("through the symlink `{link}`")),
            "{message}"
        );
        model_error(resolve(&fx.ctx, link, Access::Write));
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join("outside/secret.txt")).unwrap(),
        "outside secret\n"
    );
}

#[test]
fn write_through_a_symlinked_parent_is_refused() {
    let fx = Fixture::new();
    fx.symlink(fx.root.join("outside"), "out_dir");
    fx.symlink("sub/../../outside", "sneaky");
    std::fs::create_dir(fx.work().join("sub")).unwrap();
    for path in ["out_dir/new.txt", "out_dir/deep/new.txt", "sneaky/new.txt"] {
        let message = model_error(resolve(&fx.ctx, path, Access::Write));
        assert!(message.contains("resolves outside"), "{path}: {message}");
    }
    assert!(!fx.root.join("outside/new.txt").exists());
}

#[test]
fn symlinks_inside_are_followed() {
    let fx = Fixture::new();
    fx.file("real/target.txt", "t");
    fx.symlink("real", "dir_link");
    fx.symlink(fx.work().join("real/target.txt"), "abs_inside");
    fx.symlink("dir_link/../real/target.txt", "winding");
    for link in ["dir_link/target.txt", "abs_inside", "winding"] {
        let resolved = resolve(&fx.ctx, link, Access::Read).unwrap();
        assert_eq!(resolved.display, "real/target.txt", "{link}");
        assert_eq!(resolved.kind, Some(Kind::File));
    }
}

#[test]
fn symlink_loops_end() {
    let fx = Fixture::new();
    fx.symlink("b", "a");
    fx.symlink("a", "b");
    let message = model_error(resolve(&fx.ctx, "a", Access::Read));
    assert!(message.contains("too many levels"), "{message}");
}

#[test]
fn extra_allowed_roots_are_reachable() {
    let mut fx = Fixture::new();
    fx.ctx.allowed_roots.push(fx.root.join("outside"));
    fx.symlink(fx.root.join("outside/secret.txt"), "link");
    let resolved = resolve(&fx.ctx, "link", Access::Read).unwrap();
    assert_eq!(resolved.abs, fx.root.join("outside/secret.txt"));
    assert_eq!(
        resolved.display,
        fx.root.join("outside/secret.txt").display().to_string()
    );
}

#[test]
fn fifo_read_is_refused_without_hanging() {
    let fx = Fixture::new();
    nix::unistd::mkfifo(&fx.work().join("pipe"), Mode::from_bits_truncate(0o644)).unwrap();
    let started = Instant::now();
    let resolved = resolve(&fx.ctx, "pipe", Access::Read).unwrap();
    let message = model_error(read_bytes(&resolved, MAX_READ_BYTES));
    assert_eq!(message, "`pipe` is a FIFO, not a regular file");
    // A FIFO swapped in after resolution is caught by fstat, not read.
    let stale = Resolved {
        kind: Some(Kind::File),
        ..resolved
    };
    let message = model_error(read_bytes(&stale, MAX_READ_BYTES));
    assert!(message.contains("not a regular file"), "{message}");
    assert!(open_regular(&fx.work().join("pipe")).is_none());
    model_error(write_bytes(&fx.ctx, &stale, b"x"));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn git_and_workflow_writes_are_refused() {
    let fx = Fixture::new();
    fx.file(".git/config", "[core]\n");
    let message = model_error(resolve(&fx.ctx, ".git/hooks/pre-commit", Access::Write));
    assert_eq!(
        message,
        "`.git/hooks/pre-commit`: writing under .git/ is not allowed"
    );
    model_error(resolve(&fx.ctx, "sub/.GIT/config", Access::Write));
    model_error(resolve(&fx.ctx, ".git", Access::Write));
    let message = model_error(resolve(&fx.ctx, ".github/workflows/ci.yml", Access::Write));
    assert!(
        message.contains("writing under .github/workflows/"),
        "{message}"
    );
    // A symlink spelled differently still lands in .git.
    fx.symlink(".git", "gitlink");
    model_error(resolve(
        &fx.ctx,
        "gitlink/hooks/post-checkout",
        Access::Write,
    ));
    // Reading is fine.
    resolve(&fx.ctx, ".git/config", Access::Read).unwrap();
    resolve(&fx.ctx, ".github/CODEOWNERS", Access::Write).unwrap();
}

#[test]
fn blocked_paths_are_never_read_or_written() {
    let fx = Fixture::new();
    fx.file(".env", "KEY=1");
    fx.file("app/.env", "KEY=2");
    fx.file("config.txt", "ok");
    fx.symlink(".env", "innocent");
    for path in [".env", "app/.env", "innocent", "./app/../.env"] {
        let message = model_error(resolve(&fx.ctx, path, Access::Read));
        assert!(message.contains("blocked path"), "{path}: {message}");
        model_error(resolve(&fx.ctx, path, Access::Write));
    }
    // A literal blocked directory blocks everything under it, even when it
    // is an allowed root.
    let mut fx = fx;
    std::fs::create_dir_all(fx.root.join("blocked/sub")).unwrap();
    fx.ctx.allowed_roots.push(fx.root.join("blocked"));
    let inside = fx.root.join("blocked/sub/key");
    model_error(resolve(&fx.ctx, inside.to_str().unwrap(), Access::Write));
    resolve(&fx.ctx, "config.txt", Access::Read).unwrap();
}

#[test]
fn protected_files_are_not_written() {
    let fx = Fixture::new();
    fx.file("task.yaml", "prompt: x");
    let message = model_error(resolve(&fx.ctx, "task.yaml", Access::Write));
    assert!(message.contains("control file"), "{message}");
    resolve(&fx.ctx, "task.yaml", Access::Read).unwrap();
}

#[test]
fn reads_refuse_directories_missing_files_and_huge_files() {
    let fx = Fixture::new();
    fx.file("src/main.rs", "fn main() {}\n");
    let resolved = resolve(&fx.ctx, "src", Access::Read).unwrap();
    assert!(model_error(read_bytes(&resolved, MAX_READ_BYTES)).contains("is a directory"));
    let resolved = resolve(&fx.ctx, "src/mian.rs", Access::Read).unwrap();
    assert_eq!(
        model_error(read_bytes(&resolved, MAX_READ_BYTES)),
        "`src/mian.rs` does not exist; did you mean `src/main.rs`?"
    );
    let big = File::create(fx.work().join("big.bin")).unwrap();
    big.set_len(MAX_READ_BYTES + 1).unwrap();
    let resolved = resolve(&fx.ctx, "big.bin", Access::Read).unwrap();
    let message = model_error(read_bytes(&resolved, MAX_READ_BYTES));
    assert!(message.contains("over the 10 MB limit"), "{message}");
    let resolved = resolve(&fx.ctx, "src/main.rs", Access::Read).unwrap();
    assert_eq!(
        read_bytes(&resolved, MAX_READ_BYTES).unwrap(),
        b"fn main() {}\n"
    );
}

#[test]
fn writes_create_parents_replace_atomically_and_keep_modes() {
    let fx = Fixture::new();
    let resolved = resolve(&fx.ctx, "a/b/c.txt", Access::Write).unwrap();
    write_bytes(&fx.ctx, &resolved, b"hello").unwrap();
    assert_eq!(fx.read("a/b/c.txt"), "hello");

    let script = fx.file("run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let resolved = resolve(&fx.ctx, "run.sh", Access::Write).unwrap();
    write_bytes(&fx.ctx, &resolved, b"#!/bin/sh\necho hi\n").unwrap();
    let mode = std::fs::metadata(&script).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    let leftovers: Vec<_> = std::fs::read_dir(fx.work())
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn writes_never_go_through_hard_links() {
    let fx = Fixture::new();
    let original = fx.root.join("outside/linked.txt");
    std::fs::write(&original, "original").unwrap();
    std::fs::hard_link(&original, fx.work().join("hard.txt")).unwrap();
    let resolved = resolve(&fx.ctx, "hard.txt", Access::Write).unwrap();
    write_bytes(&fx.ctx, &resolved, b"changed").unwrap();
    assert_eq!(fx.read("hard.txt"), "changed");
    assert_eq!(std::fs::read_to_string(&original).unwrap(), "original");
}

#[test]
fn writes_refuse_directories_and_oversized_content() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.work().join("dir")).unwrap();
    let resolved = resolve(&fx.ctx, "dir", Access::Write).unwrap();
    assert!(model_error(write_bytes(&fx.ctx, &resolved, b"x")).contains("is a directory"));
    let resolved = resolve(&fx.ctx, "f", Access::Write).unwrap();
    let huge = vec![b'x'; MAX_WRITE_BYTES + 1];
    assert!(model_error(write_bytes(&fx.ctx, &resolved, &huge)).contains("limit for writing"));
    fx.file("file", "x");
    let message = model_error(resolve(&fx.ctx, "file/child", Access::Write));
    assert!(message.contains("is not a directory"), "{message}");
}

#[test]
fn a_parent_swapped_for_a_symlink_is_not_followed() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.work().join("d")).unwrap();
    let resolved = resolve(&fx.ctx, "d/new.txt", Access::Write).unwrap();
    std::fs::remove_dir(fx.work().join("d")).unwrap();
    fx.symlink(fx.root.join("outside"), "d");
    model_error(write_bytes(&fx.ctx, &resolved, b"x"));
    assert!(!fx.root.join("outside/new.txt").exists());
    // A vanished root is not recreated, nor anything above it.
    let mut gone = Fixture::new();
    gone.ctx.workdir = gone.root.join("missing/work");
    gone.ctx.allowed_roots = vec![gone.ctx.workdir.clone()];
    let resolved = Resolved {
        abs: gone.ctx.workdir.join("f.txt"),
        display: "f.txt".to_owned(),
        kind: None,
    };
    assert!(model_error(write_bytes(&gone.ctx, &resolved, b"x")).contains("does not exist"));
    assert!(!gone.root.join("missing").exists());
    let stale = Resolved {
        abs: fx.work().join("d/secret.txt"),
        display: "d/secret.txt".to_owned(),
        kind: Some(Kind::File),
    };
    let message = model_error(read_bytes(&stale, MAX_READ_BYTES));
    assert!(message.contains("symlink"), "{message}");
}

#[test]
fn control_characters_in_a_path_are_refused_by_name() {
    let fx = Fixture::new();
    fx.file("a.txt", "a");
    for (raw, named) in [
        ("a.txt\nb", "a newline"),
        ("a\0.txt", "a NUL byte"),
        ("\x1b[31ma.txt", "an escape character (ESC)"),
        ("a\r.txt", "a carriage return"),
        ("a\t.txt", "a tab"),
        ("a\x7f.txt", "U+007F"),
        ("a\x01.txt", "U+0001"),
        ("a\u{9b}.txt", "U+009B"),
    ] {
        for access in [Access::Read, Access::Write] {
            let message = model_error(resolve(&fx.ctx, raw, access));
            assert!(
                message.contains(named) && message.contains("control characters are refused"),
                "{raw:?}: {message}"
            );
        }
        let message = model_error(resolve_dir(&fx.ctx, raw));
        assert!(message.contains(named), "{message}");
    }
    // Nothing was created on the way.
    let names: Vec<_> = std::fs::read_dir(fx.work()).unwrap().collect();
    assert_eq!(names.len(), 1);
}
