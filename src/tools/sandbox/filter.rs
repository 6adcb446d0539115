//! The second layer: the seccomp program and the Landlock ruleset the
//! helper applies to itself just before it starts the program.
//!
//! seccomp. The program starts with a hand-written prefix, then the
//! rules compiled by `seccompiler`:
//!
//! - a system call whose `seccomp_data.arch` is not the native one (i386
//!   or x32 numbers on x86_64, arm on aarch64) fails with `EPERM`. The
//!   `seccompiler` program checks the architecture too, but answers a
//!   foreign one with `SECCOMP_RET_KILL_PROCESS`; the prefix answers
//!   first, with an errno, so a 32-bit program gets an error it can
//!   report instead of dying silently;
//! - on x86_64, a number with the x32 bit (`0x40000000`) fails the same way;
//! - with the exec guard ([`FilterSettings::exec_guard`]), `execve` and
//!   `execveat` return `SECCOMP_RET_USER_NOTIF`: the call waits for the
//!   guard's supervisor, which reads its path and argument vector and
//!   lets it go on or fails it with `EPERM` (the helper's `guard`
//!   module; docs/sandbox.md, "The exec guard");
//! - `clone3` fails with `ENOSYS` (its flags live in memory seccomp cannot
//!   read), so the C library falls back to `clone`, whose flags it can;
//! - a binary search allows at once every system call that no rule below
//!   names ([`fast_path`]; the kernel runs a new filter for every system
//!   call number when it is installed, so its length per number is what an
//!   install costs).
//!
//! Then `EPERM` for: `socket` of any family but `AF_UNIX` unless the
//! network is granted, `socket(AF_UNIX)` unless named sockets are
//! (`socketpair` always works), `io_uring_setup` (io_uring creates
//! sockets without `socket(2)`), `mknod`/`mknodat` of a character or
//! block device, `mount`, `umount2`, `pivot_root`, `ptrace`,
//! `process_vm_readv`/`writev`, `bpf`, `perf_event_open`, `keyctl`,
//! `add_key`, `request_key`, `kexec_load`, `kexec_file_load`,
//! `sethostname`, `setdomainname`, `unshare`, `setns`, `clone` with any
//! `CLONE_NEW*` flag, `init_module`, `finit_module`, `delete_module`, the
//! new mount API, `userfaultfd`, and `prlimit64` that sets the limits of
//! another process (the sandbox's PID 1 runs as the same user).
//!
//! Landlock (ABI v6, best effort): read and execute everywhere, every
//! write right under the writable roots, the device files writable, and
//! the scopes: no signal to a process outside the sandbox and no
//! connection to an abstract unix socket created outside it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// Why a filter could not be built or applied.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("seccomp: no filter for the {0} architecture")]
    Architecture(&'static str),
    #[error("seccomp: {0}")]
    Seccomp(#[from] seccompiler::Error),
    #[error("seccomp: {0}")]
    Program(&'static str),
    #[error("seccomp: {0}")]
    Compile(#[from] seccompiler::BackendError),
    #[error("seccomp: the exec guard's filter (SECCOMP_FILTER_FLAG_NEW_LISTENER): {0}")]
    Listener(std::io::Error),
    #[error("Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("Landlock: {0}")]
    LandlockPath(#[from] landlock::PathFdError),
    #[error("Landlock: Landlock is not supported or not enabled by this kernel")]
    NotEnforced,
}

/// Device files every child may write.
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What the filter lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterSettings {
    /// Sockets of every family.
    pub network: bool,
    /// `socket(AF_UNIX)`: named (path and abstract) unix sockets.
    pub unix_sockets: bool,
    /// `execve` and `execveat` go to the exec guard's supervisor
    /// (`SECCOMP_RET_USER_NOTIF`); the program must then be installed with
    /// [`apply_seccomp_listening`].
    pub exec_guard: bool,
}

/// Every `CLONE_NEW*` flag.
const CLONE_NEW_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    0x80, // CLONE_NEWTIME
];

/// System calls refused whatever their arguments.
const REFUSED: &[i64] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    // Stalls a page fault in the kernel for as long as the program likes
    // (the building block of many kernel exploits).
    libc::SYS_userfaultfd,
];

fn arch() -> Result<TargetArch, FilterError> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|_| FilterError::Architecture(std::env::consts::ARCH))
}

/// `AUDIT_ARCH_*` of the native architecture.
pub fn audit_arch() -> Result<u32, FilterError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(62 | 0x8000_0000 | 0x4000_0000),
        "aarch64" => Ok(183 | 0x8000_0000 | 0x4000_0000),
        "riscv64" => Ok(243 | 0x8000_0000 | 0x4000_0000),
        other => Err(FilterError::Architecture(other)),
    }
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

/// [`cond`] on the whole 64-bit argument (a pointer).
fn cond_qword(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    Ok(SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Qword,
        op,
        value,
    )?)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, FilterError> {
    Ok(SeccompRule::new(conditions)?)
}

fn u64_of(value: i32) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JSET_K: u16 = 0x05 | 0x40;
const BPF_RET_K: u16 = 0x06;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn errno(value: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (u32::try_from(value).unwrap_or(1) & 0xffff)
}

/// The hand-written prefix: foreign ABIs, the exec guard's system calls
/// when `exec_guard`, and `clone3`.
fn prefix(exec_guard: bool) -> Result<Vec<sock_filter>, FilterError> {
    let native = audit_arch()?;
    let clone3 = u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX);
    let mut program = vec![
        // arch = seccomp_data.arch (offset 4)
        stmt(BPF_LD_W_ABS, 4),
        jump(BPF_JEQ_K, native, 1, 0),
        stmt(BPF_RET_K, errno(libc::EPERM)),
        // nr = seccomp_data.nr (offset 0)
        stmt(BPF_LD_W_ABS, 0),
    ];
    if std::env::consts::ARCH == "x86_64" {
        program.push(jump(BPF_JSET_K, 0x4000_0000, 0, 1));
        program.push(stmt(BPF_RET_K, errno(libc::EPERM)));
    }
    if exec_guard {
        let number = |nr: i64| {
            u32::try_from(nr).map_err(|_| FilterError::Program("a negative system call number"))
        };
        program.push(jump(BPF_JEQ_K, number(libc::SYS_execve)?, 1, 0));
        program.push(jump(BPF_JEQ_K, number(libc::SYS_execveat)?, 0, 1));
        program.push(stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF));
    }
    program.push(jump(BPF_JEQ_K, clone3, 0, 1));
    program.push(stmt(BPF_RET_K, errno(libc::ENOSYS)));
    Ok(program)
}

/// The whole seccomp program (see the module documentation).
pub fn seccomp_program(settings: FilterSettings) -> Result<BpfProgram, FilterError> {
    build(settings, true)
}

/// The program without the fast path ([`fast_path`]): what it must answer
/// the same as.
#[cfg(test)]
pub fn chain_only_program(settings: FilterSettings) -> Result<BpfProgram, FilterError> {
    build(settings, false)
}

fn build(settings: FilterSettings, fast: bool) -> Result<BpfProgram, FilterError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in REFUSED {
        rules.insert(nr, Vec::new());
    }
    let unix = u64_of(libc::AF_UNIX);
    match (settings.network, settings.unix_sockets) {
        (false, false) => {
            rules.insert(libc::SYS_socket, Vec::new());
        }
        (false, true) => {
            rules.insert(
                libc::SYS_socket,
                vec![rule(vec![cond(0, SeccompCmpOp::Ne, unix)?])?],
            );
        }
        (true, false) => {
            rules.insert(
                libc::SYS_socket,
                vec![rule(vec![cond(0, SeccompCmpOp::Eq, unix)?])?],
            );
        }
        (true, true) => {}
    }
    let file_type = u64_of(i32::try_from(libc::S_IFMT).unwrap_or(0o170_000));
    let devices = [libc::S_IFCHR, libc::S_IFBLK];
    let device_rules = |arg: u8| -> Result<Vec<SeccompRule>, FilterError> {
        devices
            .iter()
            .map(|kind| {
                let kind = u64_of(i32::try_from(*kind).unwrap_or(0));
                rule(vec![cond(arg, SeccompCmpOp::MaskedEq(file_type), kind)?])
            })
            .collect()
    };
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, device_rules(1)?);
    rules.insert(libc::SYS_mknodat, device_rules(2)?);
    let clone_rules = CLONE_NEW_FLAGS
        .iter()
        .map(|flag| {
            let flag = u64_of(*flag);
            rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?])
        })
        .collect::<Result<Vec<_>, FilterError>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    // Setting another process's limits (the sandbox's PID 1 runs as the
    // same user): reading them, and setting one's own (pid 0), still work.
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![
            cond(0, SeccompCmpOp::Ne, 0)?,
            cond_qword(2, SeccompCmpOp::Ne, 0)?,
        ])?],
    );
    let numbers: Vec<i64> = rules.keys().copied().collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(u32::try_from(libc::EPERM).unwrap_or(1)),
        arch()?,
    )?;
    let compiled: BpfProgram = filter.try_into()?;
    let mut program = prefix(settings.exec_guard)?;
    if fast {
        program.extend(fast_path(&numbers)?);
    }
    program.extend(compiled);
    Ok(program)
}

/// Why the fast path: the kernel's seccomp action cache. When a filter is
/// installed the kernel runs it, in an emulator, for every system call
/// number of the architecture (about 460), to learn which ones it always
/// allows. Through `seccompiler`'s chain, which compares the number with
/// each rule's system call in turn, that is about 80 instructions per
/// number, most of the 130 µs an install took. With the fast path, a
/// binary search over the numbers that have a rule, a number without one
/// is allowed after about 6 comparisons; a number with one goes on to
/// the chain as before. The chain allows every number without a rule, so
/// the answer is the same for every system call.
///
/// Expects the number in the accumulator (the end of [`prefix`]).
fn fast_path(numbers: &[i64]) -> Result<Vec<sock_filter>, FilterError> {
    let mut numbers = numbers
        .iter()
        .map(|nr| u32::try_from(*nr))
        .collect::<Result<Vec<u32>, _>>()
        .map_err(|_| FilterError::Program("a negative system call number"))?;
    numbers.sort_unstable();
    numbers.dedup();
    let mut ops = Vec::new();
    search(&numbers, &mut ops);
    let end = ops.len();
    // Too long for a conditional jump's 8-bit offset: never with the
    // rules above, which have about 40 numbers.
    let too_far = || FilterError::Program("the fast path is too long");
    let mut program = Vec::with_capacity(end + 1);
    for (at, (code, k, jt, jf)) in ops.into_iter().enumerate() {
        let offset = |target: Target| -> Result<u8, FilterError> {
            let distance = match target {
                Target::Next(skip) => skip,
                // The `RET ALLOW` right after the search.
                Target::Allow => end - at - 1,
                // The chain right after it.
                Target::Chain => end - at,
            };
            u8::try_from(distance).map_err(|_| too_far())
        };
        program.push(jump(code, k, offset(jt)?, offset(jf)?));
    }
    program.push(stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW));
    Ok(program)
}

/// Where a jump of the fast path goes.
#[derive(Clone, Copy)]
enum Target {
    /// This many instructions ahead (0: the next one).
    Next(usize),
    /// Allowed: no rule names the number.
    Allow,
    /// On to the chain of rules.
    Chain,
}

const BPF_JGE_K: u16 = 0x05 | 0x30;

/// A binary search for the number in the accumulator among `numbers`
/// (sorted): each found number goes on to the chain, every other is
/// allowed.
fn search(numbers: &[u32], ops: &mut Vec<(u16, u32, Target, Target)>) {
    if numbers.len() <= 3 {
        for &nr in numbers {
            ops.push((BPF_JEQ_K, nr, Target::Chain, Target::Next(0)));
        }
        ops.push((BPF_JEQ_K, 0, Target::Allow, Target::Allow));
        return;
    }
    let (low, high) = numbers.split_at(numbers.len() / 2);
    let at = ops.len();
    ops.push((BPF_JGE_K, high[0], Target::Next(0), Target::Next(0)));
    search(low, ops);
    // Past the lower half when the number is at least the upper half's
    // first.
    ops[at].2 = Target::Next(ops.len() - at - 1);
    search(high, ops);
}

/// The Landlock ruleset: read everywhere, write under `writable`, the
/// device files writable, signals and abstract sockets scoped. Returns
/// the ruleset, ready for `restrict_self`.
pub fn landlock_ruleset(writable: &[PathBuf]) -> Result<landlock::RulesetCreated, FilterError> {
    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope,
    };
    let abi = ABI::V6;
    let read = AccessFs::from_read(abi) | AccessFs::IoctlDev;
    let all = AccessFs::from_all(abi);
    let file_write = AccessFs::WriteFile | AccessFs::Truncate | AccessFs::ReadFile;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?;
    let root = PathFd::new("/")?;
    ruleset = ruleset.add_rule(PathBeneath::new(root, read))?;
    for path in writable {
        let Ok(fd) = PathFd::new(path) else { continue };
        ruleset = ruleset.add_rule(PathBeneath::new(fd, all))?;
    }
    for device in WRITABLE_DEVICES {
        if let Ok(fd) = PathFd::new(device) {
            ruleset = ruleset.add_rule(PathBeneath::new(fd, file_write | AccessFs::IoctlDev))?;
        }
    }
    Ok(ruleset)
}

/// Applies the seccomp program to the calling thread.
pub fn apply_seccomp(program: &BpfProgram) -> Result<(), FilterError> {
    Ok(seccompiler::apply_filter(program)?)
}

/// Applies the seccomp program to the calling thread with a listener
/// (`SECCOMP_FILTER_FLAG_NEW_LISTENER`): the program of the exec guard
/// ([`FilterSettings::exec_guard`]). The listener answers for this thread
/// and every process it starts; it must go to the supervisor and be
/// closed here.
pub fn apply_seccomp_listening(program: &BpfProgram) -> Result<std::os::fd::OwnedFd, FilterError> {
    let program: Vec<libc::sock_filter> = program
        .iter()
        .map(|op| libc::sock_filter {
            code: op.code,
            jt: op.jt,
            jf: op.jf,
            k: op.k,
        })
        .collect();
    super::sys::notify::install_with_listener(&program).map_err(FilterError::Listener)
}

/// Applies the ruleset to the calling thread; the Landlock status.
pub fn restrict(ruleset: landlock::RulesetCreated) -> Result<&'static str, FilterError> {
    let status = ruleset.restrict_self()?;
    match status.ruleset {
        landlock::RulesetStatus::FullyEnforced => Ok("fully_enforced"),
        landlock::RulesetStatus::PartiallyEnforced => Ok("partially_enforced"),
        landlock::RulesetStatus::NotEnforced => Err(FilterError::NotEnforced),
    }
}
