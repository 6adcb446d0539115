mod architecture;
mod git;
mod run;
mod tools;
mod validate;
