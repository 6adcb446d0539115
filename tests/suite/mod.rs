mod architecture;
mod external;
mod git;
mod providers;
mod run;
mod tools;
mod validate;
