mod architecture;
mod git;
mod providers;
mod run;
mod tools;
mod validate;
