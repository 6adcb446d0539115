use std::process::ExitCode;

fn main() -> ExitCode {
    // `ybs __sandbox ...` is the sandbox helper: handled before anything
    // else starts (no runtime, no thread).
    ybs::tools::sandbox::helper_entry();
    ybs::cli::main(std::env::args_os())
}
