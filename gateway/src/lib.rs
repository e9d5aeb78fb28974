//! gateway: the Kafka wire front end of AeroStream.

pub mod group;
