//! The only place with `unsafe` and raw module API calls.
//!
//! Every unsafe block does one operation and says why it is sound in a `// SAFETY:` line. Every
//! `extern "C"` callback casts pointers and calls into safe code. The rest of the crate sees
//! safe functions and RAII handles.

pub mod clock;
pub mod cmdinfo;
pub mod command;
pub mod datatype;
pub mod events;
pub mod key;
pub mod log;
pub mod notify;
pub mod replicate;
pub mod reply;
pub mod stream;
pub mod wait;
