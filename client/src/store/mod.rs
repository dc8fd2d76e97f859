//! The history store: every delivery in SQLite.

pub mod model;

pub use model::{Delivery, NewDelivery, Outcome, ReplayRun, Summary};
