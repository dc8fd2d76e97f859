//! Deliveries made readable: for terminals (sanitised, secrets masked) and
//! for other tools (HAR, curl, JSON).
//!
//! Everything here is pure: a delivery in, text or JSON out.

pub mod body;
pub mod curl;
pub mod export;
pub mod har;
pub mod json;
pub mod mask;
pub mod show;
pub mod table;
