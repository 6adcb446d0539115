mod architecture;
mod providers;
mod run;
mod validate;
