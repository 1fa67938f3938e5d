//! The one path every limiter call takes, and what it is made of: [`run`] (parse, time, open,
//! judge, settle, finish), the arguments and shared options ([`args`], the option table
//! [`options`]), `AT` as propagated ([`at`]), the time a call is evaluated at ([`evaluation`]), the detailed reply
//! ([`detail`]), how a write reaches replicas and the AOF ([`propagate`]) and what it arrives as
//! there ([`restore`]: RL._RESTORE, RL._SET), and the tail every write ends with ([`tail`]).

pub mod args;
#[cfg(test)]
mod args_tests;
pub mod at;
pub mod detail;
pub mod evaluation;
pub mod options;
#[cfg(test)]
mod options_tests;
pub mod propagate;
pub mod restore;
pub mod run;
pub mod tail;
