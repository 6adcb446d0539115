mod architecture;
mod run;
mod tools;
mod validate;
