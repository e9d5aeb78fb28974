//! Settings of `aerostream serve`: flags win over `AEROSTREAM_*` environment
//! variables, which win over the TOML file given with `--config`, which wins
//! over the built-in defaults.

mod address;
mod args;
mod byte_count;
mod cluster;
mod file;
mod security;
mod settings;

pub use self::security::oauthbearer_warning;
pub use args::ServeArgs;
pub use cluster::ClusterSettings;
pub use settings::Settings;
