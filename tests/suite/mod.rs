mod architecture;
mod git;
mod policy;
mod run;
mod security;
mod tools;
mod validate;
