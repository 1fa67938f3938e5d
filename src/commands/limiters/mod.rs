//! The algorithms' commands, one file each (the algorithm's parameters parsed, its COMMAND
//! DOCS; `commands::call::run` does the rest), CL.THROTTLE over GCRA, RL.STREAMCOUNT over a
//! Redis stream, RL.ALL's table of the algorithms' commands ([`registry`]), and RL.ALL over one
//! key run as its limiter's own command ([`alone`]).

pub mod alone;
pub mod fixed;
pub mod gcra;
pub mod leaky_bucket;
pub mod registry;
pub mod sliding;
pub mod sliding_counter;
pub mod stream_count;
pub mod throttle;
pub mod token_bucket;
