//! The file system view inside the mount namespace, built by PID 1.
//!
//! Order matters: host paths under `/tmp` that must stay visible (the
//! workdir, tool directories) are opened before the private `/tmp` hides
//! them and bound back at the same place through `/proc/self/fd`; then
//! every mount but the writable roots is remounted read-only the way
//! bubblewrap does it (`MS_REMOUNT | MS_BIND | MS_RDONLY`, keeping the
//! flags a user namespace may not drop: `nosuid`, `nodev`, `noexec`, the
//! atime flags, read with `statvfs`); then the protected paths are bound
//! onto themselves read-only, the outputs hidden, `/proc` and `/dev`
//! replaced.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::libc;

use super::{Result, SetupError, failed, failed_nix};
use crate::tools::sandbox::spec::HelperSpec;
use crate::tools::sandbox::sys;

/// Host devices bound into the minimal `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<()> {
    mount_raw(source, target, fstype, flags, data)
        .map_err(failed(format_args!("mount {}", target.display())))
}

fn mount_raw(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> std::io::Result<()> {
    let source = source.map(sys::c_path).transpose()?;
    let target = sys::c_path(target)?;
    let fstype = fstype.map(|f| CString::new(f).unwrap_or_default());
    let data = data.map(|d| CString::new(d).unwrap_or_default());
    sys::mount(
        source.as_deref(),
        &target,
        fstype.as_deref(),
        flags,
        data.as_deref(),
    )
}

/// An empty, read-only tmpfs over the directory `path`.
fn empty_read_only(path: &Path) -> Result<()> {
    mount(
        Some(Path::new("tmpfs")),
        path,
        Some("tmpfs"),
        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some("mode=0555,size=4k"),
    )
}

fn bind(source: &Path, target: &Path) -> Result<()> {
    mount(
        Some(source),
        target,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )
}

/// The flags of the mount at `path` that a remount must keep.
fn kept_flags(path: &Path) -> std::io::Result<libc::c_ulong> {
    use nix::sys::statvfs::FsFlags;
    let stat = nix::sys::statvfs::statvfs(path)?;
    let mut flags = 0;
    for (st, ms) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if stat.flags().contains(st) {
            flags |= ms;
        }
    }
    Ok(flags)
}

/// Remounts the mount at `path` read-only, keeping its locked flags.
fn remount_ro(path: &Path) -> std::io::Result<()> {
    let flags = kept_flags(path)?;
    mount_raw(
        None,
        path,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
        None,
    )
}

fn open_path(path: &Path) -> Result<OwnedFd> {
    nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(failed_nix(path.display()))
}

fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Creates an empty directory or file at `path` to mount onto.
fn mount_point(path: &Path, directory: bool) -> Result<()> {
    let made = if directory {
        std::fs::create_dir_all(path)
    } else {
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(path)
                    .map(drop)
            })
    };
    made.map_err(failed(format_args!("mount point {}", path.display())))
}

/// Builds the whole view (see the module documentation).
pub fn build(spec: &HelperSpec) -> Result<()> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let covers = covers(spec);
    // Opened before the private /tmp, the empty home, the masks and /dev
    // hide them.
    let kept = open_kept(spec, &covers)?;
    let devices: Vec<(&str, OwnedFd)> = DEVICES
        .iter()
        .filter_map(|name| Some((*name, open_path(&Path::new("/dev").join(name)).ok()?)))
        .collect();
    let ro_roots = cover_and_keep(spec, &covers, kept)?;
    pin_ancestors(spec)?;
    read_only_elsewhere(spec, &ro_roots)?;
    // Toolchain homes and caches writable for the task only (before the
    // blocked paths, so `~/.cargo/credentials.toml` is hidden on top).
    for (index, path) in spec.scratch.iter().enumerate() {
        scratch_overlay(
            path,
            &Path::new("/tmp").join(SCRATCH_DIR).join(index.to_string()),
        );
    }
    protect_and_hide(spec, &covers)?;
    private_proc()?;
    minimal_dev(devices)
}

/// What hides a host directory in the view.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cover {
    /// `/tmp`: the task's private temp dir.
    Tmp,
    /// The user's home: an empty tmpfs of the task's own, writable.
    Home,
    /// An empty tmpfs, read-only once the kept paths are back.
    Mask,
}

/// The host directories the view hides, each with what hides it: `/tmp`,
/// the home, the masked directories and the blocked directories that hold
/// a kept path (shown empty with the kept path bound back: a blocked path
/// is never given up for a kept one). Shortest first.
fn covers(spec: &HelperSpec) -> Vec<(PathBuf, Cover)> {
    let kept: Vec<&PathBuf> = kept_paths(spec).map(|(path, _)| path).collect();
    let mut covers = vec![(PathBuf::from("/tmp"), Cover::Tmp)];
    covers.extend(spec.home.iter().map(|home| (home.clone(), Cover::Home)));
    covers.extend(spec.masked.iter().map(|path| (path.clone(), Cover::Mask)));
    covers.extend(
        spec.blocked
            .iter()
            .filter(|blocked| {
                kept.iter()
                    .any(|kept| kept.starts_with(blocked) && kept != blocked)
            })
            .filter(|blocked| blocked.is_dir())
            .map(|blocked| (blocked.clone(), Cover::Mask)),
    );
    // A kept path at the very place of a cover is bound there instead (a
    // recursive bind of it would bring the cover along).
    covers.retain(|(path, kind)| {
        path.is_dir()
            && path != Path::new("/")
            && (*kind == Cover::Tmp
                || !kept
                    .iter()
                    .any(|kept| kept == &path && !spec.blocked.contains(kept)))
    });
    covers.sort_by_key(|(path, _)| path.as_os_str().len());
    covers.dedup_by(|later, earlier| later.0 == earlier.0);
    covers
}

/// The workdir, the operator's writable roots (writable) and the visible
/// paths (read-only).
fn kept_paths(spec: &HelperSpec) -> impl Iterator<Item = (&PathBuf, bool)> {
    std::iter::once((&spec.workdir, true))
        .chain(spec.writable.iter().map(|path| (path, true)))
        .chain(spec.visible.iter().map(|path| (path, false)))
}

/// A host path under a cover to bind back in the view.
struct Kept {
    path: PathBuf,
    fd: OwnedFd,
    directory: bool,
    writable: bool,
}

/// The kept paths at or under a cover (but for a blocked one), opened.
fn open_kept(spec: &HelperSpec, covers: &[(PathBuf, Cover)]) -> Result<Vec<Kept>> {
    let mut kept = Vec::new();
    for (path, writable) in kept_paths(spec) {
        let covered = covers
            .iter()
            .any(|(cover, kind)| path.starts_with(cover) && (path != cover || *kind != Cover::Tmp));
        if !covered || spec.blocked.contains(path) {
            continue;
        }
        match open_path(path) {
            Ok(fd) => kept.push(Kept {
                path: path.clone(),
                fd,
                directory: path.is_dir(),
                writable,
            }),
            Err(error) if writable => return Err(error),
            Err(_) => {}
        }
    }
    Ok(kept)
}

/// The covers laid and the kept paths bound back on them, shortest path
/// first (a cover before a kept path at the same place), so that each
/// lands on what holds it; the workdir and writable roots elsewhere bound
/// onto themselves. Returns the read-only roots: the kept paths that are
/// not writable and the masks.
fn cover_and_keep(
    spec: &HelperSpec,
    covers: &[(PathBuf, Cover)],
    kept: Vec<Kept>,
) -> Result<Vec<PathBuf>> {
    enum Step<'a> {
        Cover(&'a Path, &'a Cover),
        Keep(&'a Kept),
    }
    let mut steps: Vec<(usize, u8, Step<'_>)> = covers
        .iter()
        .map(|(path, kind)| (path.as_os_str().len(), 0, Step::Cover(path, kind)))
        .chain(
            kept.iter()
                .map(|kept| (kept.path.as_os_str().len(), 1, Step::Keep(kept))),
        )
        .collect();
    steps.sort_by_key(|(length, order, _)| (*length, *order));
    let mut ro_roots = Vec::new();
    for (_, _, step) in &steps {
        match step {
            Step::Cover(path, Cover::Tmp) => {
                mount(Some(&spec.temp), path, None, libc::MS_BIND, None)?
            }
            Step::Cover(path, kind) => {
                mount_point(path, true)?;
                empty_writable(path)?;
                if **kind == Cover::Home {
                    write_gitconfig(path, spec.gitconfig.as_deref());
                } else {
                    ro_roots.push(path.to_path_buf());
                }
            }
            Step::Keep(kept) => {
                mount_point(&kept.path, kept.directory)?;
                bind(&fd_path(&kept.fd), &kept.path)?;
                if !kept.writable {
                    ro_roots.push(kept.path.clone());
                }
            }
        }
    }
    drop(kept);
    for path in std::iter::once(&spec.workdir).chain(&spec.writable) {
        if !covers.iter().any(|(cover, _)| path.starts_with(cover)) {
            bind(path, path)?;
        }
    }
    Ok(ro_roots)
}

/// An empty tmpfs over the directory `path`, writable until the view is
/// made read-only where it must be.
fn empty_writable(path: &Path) -> Result<()> {
    mount(
        Some(Path::new("tmpfs")),
        path,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755,size=64m"),
    )
}

/// The home's `.gitconfig`: the identity the host's gives, nothing else.
fn write_gitconfig(home: &Path, text: Option<&str>) {
    if let Some(text) = text {
        let _ = std::fs::write(home.join(".gitconfig"), text);
    }
}

/// The directories between the workdir and a protected or hidden path
/// become mount points (still writable), so they cannot be renamed away
/// to recreate the protected path elsewhere (`mv .github x`).
fn pin_ancestors(spec: &HelperSpec) -> Result<()> {
    let mut ancestors: Vec<&Path> = spec
        .read_only
        .iter()
        .chain(&spec.hidden)
        .filter(|path| path.starts_with(&spec.workdir))
        .flat_map(|path| {
            path.ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != spec.workdir)
        })
        .filter(|ancestor| ancestor.is_dir())
        .collect();
    ancestors.sort_by_key(|path| path.as_os_str().len());
    ancestors.dedup();
    for ancestor in ancestors {
        bind(ancestor, ancestor)?;
    }
    Ok(())
}

/// Every mount but the writable roots remounted read-only.
fn read_only_elsewhere(spec: &HelperSpec, ro_roots: &[PathBuf]) -> Result<()> {
    let mut rw_roots = vec![spec.workdir.clone(), PathBuf::from("/tmp")];
    rw_roots.extend(spec.writable.iter().cloned());
    // The empty home is writable; a kept path bound back over the whole
    // of it is not (unless it is a writable root, listed above).
    rw_roots.extend(
        spec.home
            .iter()
            .filter(|home| !ro_roots.contains(home))
            .cloned(),
    );
    for mount_point in mount_points()? {
        let rw = longest_root(&mount_point, &rw_roots);
        let ro = longest_root(&mount_point, ro_roots);
        let length = |root: &PathBuf| root.as_os_str().len();
        if rw.is_some_and(|rw| ro.is_none_or(|ro| length(rw) >= length(ro))) {
            continue;
        }
        if let Err(error) = remount_ro(&mount_point) {
            let unreachable = matches!(
                error.raw_os_error(),
                Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES)
            );
            let special = ["/proc", "/sys", "/dev"]
                .iter()
                .any(|root| mount_point.starts_with(root));
            if !unreachable && !special {
                return Err(failed(format_args!(
                    "remount {} read-only",
                    mount_point.display()
                ))(error));
            }
        }
    }
    Ok(())
}

/// `path` bound onto itself read-only.
fn bind_read_only(path: &Path) -> Result<()> {
    bind(path, path)?;
    remount_ro(path).map_err(failed(format_args!("remount {} read-only", path.display())))
}

/// Protected paths read-only, outputs hidden, blocked paths (credentials)
/// hidden outright, files too. A blocked path the helper cannot even look
/// at is as unreadable to the program.
fn protect_and_hide(spec: &HelperSpec, covers: &[(PathBuf, Cover)]) -> Result<()> {
    for path in &spec.read_only {
        if path.symlink_metadata().is_ok() {
            bind_read_only(path)?;
        }
    }
    for path in &spec.hidden {
        if path.is_dir() {
            empty_read_only(path)?;
        } else if path.is_file() {
            bind_read_only(path)?;
        }
    }
    for path in &spec.blocked {
        // A blocked directory holding a kept path is a cover already.
        if covers.iter().any(|(cover, _)| cover == path) {
            continue;
        }
        let hidden = if path.is_dir() {
            empty_read_only(path)
        } else if path.exists() {
            bind(Path::new("/dev/null"), path).and_then(|()| {
                remount_ro(path)
                    .map_err(failed(format_args!("remount {} read-only", path.display())))
            })
        } else {
            Ok(())
        };
        hidden
            .map_err(|error| SetupError::Reported(format!("hide {}: {error}", path.display())))?;
    }
    Ok(())
}

/// A minimal `/dev`: a tmpfs with the host's harmless devices bound in
/// (opened before), the `fd`/`stdin`/`stdout`/`stderr` links, a small
/// `/dev/shm`; read-only but for `/dev/shm`.
fn minimal_dev(devices: Vec<(&str, OwnedFd)>) -> Result<()> {
    let dev = Path::new("/dev");
    mount(
        Some(Path::new("tmpfs")),
        dev,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("mode=0755,size=64k"),
    )?;
    for (name, fd) in &devices {
        let target = dev.join(name);
        mount_point(&target, false)?;
        bind(&fd_path(fd), &target)?;
    }
    drop(devices);
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link))
            .map_err(failed(format_args!("/dev/{link}")))?;
    }
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(failed("/dev/shm"))?;
    mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=1777,size=64m"),
    )?;
    remount_ro(dev).map_err(failed("remount /dev read-only"))
}

/// Where, under the private `/tmp`, the scratch overlays keep what the
/// task's programs wrote.
pub const SCRATCH_DIR: &str = ".ybs-scratch";

/// An overlay over the directory `path` whose upper layer is in `layers`
/// (under the private `/tmp`, removed with it): the programs read what is
/// there and write without changing it. Best effort: where the kernel
/// refuses the overlay (a path overlayfs cannot take as an option, an
/// upper file system without user xattrs), `path` stays read-only, as
/// every path outside the writable roots is.
fn scratch_overlay(path: &Path, layers: &Path) {
    let text = path.to_string_lossy();
    if text.contains([',', ':', '\\']) {
        return;
    }
    let (upper, work) = (layers.join("upper"), layers.join("work"));
    if std::fs::create_dir_all(&upper).is_err() || std::fs::create_dir_all(&work).is_err() {
        return;
    }
    let options = format!(
        "lowerdir={text},upperdir={},workdir={},userxattr",
        upper.display(),
        work.display()
    );
    let _ = mount_raw(
        Some(Path::new("overlay")),
        path,
        Some("overlay"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&options),
    );
}

/// The longest of `roots` that `path` is at or under.
fn longest_root<'r>(path: &Path, roots: &'r [PathBuf]) -> Option<&'r PathBuf> {
    roots
        .iter()
        .filter(|root| path.starts_with(root))
        .max_by_key(|root| root.as_os_str().len())
}

/// Mount points from `/proc/self/mountinfo`, octal escapes decoded.
fn mount_points() -> Result<Vec<PathBuf>> {
    let text =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(failed("/proc/self/mountinfo"))?;
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| {
            PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(unescape(field)),
            )
        })
        .collect();
    points.dedup();
    Ok(points)
}

/// `\040` and the like back to bytes.
pub fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(value).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// A `/proc` of the calling process's PID namespace over `/proc` (in a
/// mount namespace of its own).
pub fn private_proc() -> Result<()> {
    mount(
        Some(Path::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
}

/// What the probe needs: a private mount tree, a new `/proc`, a tmpfs.
pub fn probe() -> Result<()> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    mount(
        Some(Path::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    mount(
        Some(Path::new("tmpfs")),
        Path::new("/tmp"),
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("size=4k"),
    )?;
    let _ = remount_ro(Path::new("/tmp"));
    Ok(())
}
