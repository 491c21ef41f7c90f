//! The pure semantic model of a program's threads and synchronisation objects.
//!
//! The executor tells the model which operation each thread is about to perform
//! ([`Model::set_pending`]); the model says which threads are enabled, executes the operation
//! the scheduler picks ([`Model::execute`]) and reports deadlocks and API misuse. It never
//! touches a process: memory it needs (a futex word, a semaphore value to write back) comes
//! through the [`MemoryView`] trait, so it can be tested on synthetic event sequences.

mod fingerprint;
mod footprint;
mod objects;
mod ops;
mod spaces;
mod state;
mod waits;

pub use footprint::{Footprint, Role, Touch};
pub use ops::{Attempt, Completion, MutexType, ObjectKind, ObjectRef, Op};
pub use spaces::{address_of, in_space, space_of, Space};
pub use state::{MemoryView, Model};
pub use waits::{BlockedThread, Holder, ModelFinding};

/// Logical thread id: 0 is the main thread, then threads in creation order.
pub type ThreadId = usize;
/// An address in the traced program.
pub type Addr = u64;
/// The code address an operation was called from (a return address), for reports.
pub type Site = u64;

/// Error numbers the model returns (Linux values).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// Resource temporarily unavailable.
    pub const EAGAIN: i32 = 11;
    /// Bad address.
    pub const EFAULT: i32 = 14;
    /// Device or resource busy.
    pub const EBUSY: i32 = 16;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// Resource deadlock would occur.
    pub const EDEADLK: i32 = 35;
    /// Function not implemented.
    pub const ENOSYS: i32 = 38;
    /// Timer expired.
    pub const ETIMEDOUT: i32 = 110;
}

#[cfg(test)]
mod tests;
