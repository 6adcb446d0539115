mod architecture;
mod run;
mod validate;
