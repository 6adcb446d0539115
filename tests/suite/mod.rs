mod architecture;
mod git;
mod run;
mod validate;
