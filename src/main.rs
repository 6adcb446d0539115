use std::process::ExitCode;

fn main() -> ExitCode {
    ybs::cli::main(std::env::args_os())
}
