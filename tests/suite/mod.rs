mod architecture;
mod external;
mod run;
mod tools;
mod validate;
