#![allow(dead_code)]
pub mod conformance;
pub mod servers;
