mod architecture;
mod git;
mod run;
mod security;
mod tools;
mod validate;
